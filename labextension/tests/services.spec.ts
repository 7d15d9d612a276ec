import {
  applyService,
  currentMirror,
  describeTraffic,
  formatLineage,
  formatMirror,
  formatReplicas,
  formatTraffic,
  IServiceStats,
  inferenceBody,
  mirrorShares,
  parseService,
  serviceName,
  serviceVersions,
  trafficShares
} from '../src/services';

describe('inferenceBody', () => {
  it('shapes one zero tensor per declared input, a variable dimension as 1', () => {
    const body = inferenceBody({
      name: 'digits',
      inputs: [
        { name: 'pixels', datatype: 'FP32', shape: [-1, 2, 2] },
        { name: 'label', datatype: 'BYTES', shape: [1] },
        { datatype: 'FP32', shape: [3] } // no name: not a usable input
      ]
    });
    expect(body).toEqual({
      inputs: [
        {
          name: 'pixels',
          shape: [1, 2, 2],
          datatype: 'FP32',
          data: [0, 0, 0, 0]
        },
        { name: 'label', shape: [1], datatype: 'BYTES', data: [''] }
      ]
    });
  });

  it('gives a one-value FP64 tensor when the server declares no inputs', () => {
    const fallback = {
      inputs: [{ name: 'input-0', shape: [1, 1], datatype: 'FP64', data: [0] }]
    };
    expect(inferenceBody({ name: 'iris', inputs: [] })).toEqual(fallback);
    expect(inferenceBody(null)).toEqual(fallback);
  });
});

describe('service rows', () => {
  const record = parseService({
    id: 'iris-v2',
    name: 'iris',
    version: 2,
    state: 'Running',
    url: '/kubelab/services/iris-v2/',
    replicas: [
      { index: 0, state: 'Ready' },
      { index: 1, state: 'Restarting' }
    ],
    lineage: { run: 'r1', sweep: 's1', trial: 0, file: 'outputs/m.joblib' }
  });

  it('reads a record, filling what an older server leaves out', () => {
    expect(record.version).toBe('2');
    expect(record.endpoint).toBe('');
    expect(() => parseService({ id: 'x', name: 'x', url: '/' })).toThrow(
      'service.state'
    );
  });

  it('says what it serves and how many replicas answer', () => {
    expect(formatReplicas(record)).toBe('1/2');
    expect(formatLineage(record.lineage)).toBe(
      'sweep s1 · trial #0 · outputs/m.joblib'
    );
    expect(formatLineage({ run: 'r1', run_name: 'train', file: 'a.pkl' })).toBe(
      'run train · a.pkl'
    );
  });

  it('suggests a DNS label from a sweep name', () => {
    expect(serviceName('Iris C_2')).toBe('iris-c-2');
    expect(serviceName('2 fast!')).toBe('fast');
    expect(serviceName('___')).toBe('model');
  });
});

describe('formatTraffic', () => {
  const stats = (values: Partial<IServiceStats>): IServiceStats => ({
    window_s: 60,
    requests: 192,
    rate: 3.2,
    p50_ms: 12.4,
    p95_ms: 48.25,
    errors: 0,
    ...values
  });

  it('shows the rate and the median latency of the last minute', () => {
    expect(formatTraffic(stats({}))).toBe('3.2 req/s · p50 12 ms');
    expect(formatTraffic(stats({ rate: 120.4, p50_ms: 13.6 }))).toBe(
      '120 req/s · p50 14 ms'
    );
    expect(formatTraffic(stats({ rate: 0.05, p50_ms: 0.8 }))).toBe(
      '0.1 req/s · p50 0.8 ms'
    );
    expect(describeTraffic(stats({}))).toBe(
      '192 requests in the last 60 s, p95 48 ms'
    );
  });

  it('names failures, one or several', () => {
    expect(formatTraffic(stats({ errors: 1 }))).toBe(
      '3.2 req/s · p50 12 ms · 1 error'
    );
    expect(formatTraffic(stats({ errors: 4 }))).toBe(
      '3.2 req/s · p50 12 ms · 4 errors'
    );
  });

  it('says so when nothing came through the proxy', () => {
    expect(formatTraffic(undefined)).toBe('no requests yet');
    expect(
      formatTraffic(stats({ requests: 0, rate: 0, p50_ms: null, p95_ms: null }))
    ).toBe('no requests yet');
    expect(describeTraffic(undefined)).toContain('last minute');
  });
});

describe('applyService', () => {
  it('keeps the last figures when an event brings a view without them', () => {
    const base = parseService({
      id: 'iris-v1',
      name: 'iris',
      state: 'Running',
      url: '/kubelab/services/iris-v1/'
    });
    const figures = {
      window_s: 60,
      requests: 2,
      rate: 0.5,
      p50_ms: 3,
      p95_ms: 4,
      errors: 0
    };
    const listed = applyService([], { ...base, stats: figures });
    const evented = applyService(listed, { ...base, state: 'Stopped' });
    expect(evented[0].state).toBe('Stopped');
    expect(evented[0].stats).toEqual(figures);
    const fresh = { ...figures, requests: 5 };
    expect(applyService(evented, { ...base, stats: fresh })[0].stats).toEqual(
      fresh
    );
  });
});

describe('traffic between versions', () => {
  const version = (v: string, created: string, traffic?: number) =>
    parseService({
      id: `iris-v${v}`,
      name: 'iris',
      version: v,
      state: 'Running',
      url: 'http://iris.user-alice.svc:8080/',
      traffic,
      created_at: created
    });

  it('lists a cluster service’s versions, oldest first', () => {
    const services = [
      version('2', '2026-01-02T00:00:00Z', 10),
      version('1', '2026-01-01T00:00:00Z', 90),
      { ...version('3', '2026-01-03T00:00:00Z'), name: 'other' }
    ];
    expect(serviceVersions(services, 'iris').map(s => s.version)).toEqual([
      '1',
      '2'
    ]);
  });

  it('leaves out a local service, whose versions share no traffic', () => {
    const local = version('1', '2026-01-01T00:00:00Z');
    expect(serviceVersions([local], 'iris')).toEqual([]);
  });

  it('sends whole numbers as numbers, anything else as typed, empty left out', () => {
    expect(
      trafficShares({
        '1': ' 90 ',
        '2': '10%',
        '3': '',
        '4': 'ten',
        '5': '2.5'
      })
    ).toEqual({ '1': 90, '2': 10, '4': 'ten', '5': '2.5' });
  });

  it('finds the version the requests are mirrored to, none when no version gets a copy', () => {
    const one = version('1', '2026-01-01T00:00:00Z', 90);
    const two = { ...version('2', '2026-01-02T00:00:00Z', 10), mirror: 100 };
    expect(currentMirror([one, two])).toEqual({ version: '2', percent: 100 });
    expect(currentMirror([one, { ...two, mirror: 0 }])).toBeUndefined();
    expect(
      currentMirror([one, version('2', '2026-01-02T00:00:00Z', 10)])
    ).toBeUndefined();
  });

  it('sends the mirror chosen as one version’s percent, none as no mirror at all', () => {
    expect(mirrorShares('2', ' 100% ')).toEqual({ '2': 100 });
    expect(mirrorShares('2', '25')).toEqual({ '2': 25 });
    expect(mirrorShares('', '100')).toEqual({}); // none: the mirror is removed
    expect(mirrorShares('2', 'half')).toEqual({ '2': 'half' }); // the server names mirror.2
    expect(mirrorShares('2', '')).toEqual({ '2': '' });
  });

  it('shows a mirrored version’s copied share in its row, nothing for the others', () => {
    const two = version('2', '2026-01-02T00:00:00Z', 10);
    expect(formatMirror({ ...two, mirror: 100 })).toBe('mirror 100%');
    expect(formatMirror({ ...two, mirror: 0 })).toBe('');
    expect(formatMirror(two)).toBe('');
  });
});

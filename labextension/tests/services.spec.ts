import {
  formatLineage,
  formatReplicas,
  inferenceBody,
  parseService,
  serviceName
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

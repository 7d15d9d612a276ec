import { KubelabApi, KubelabApiError, describeError } from '../src/api';
import { describePreview, parsePreview } from '../src/preview';
import { ITestServer, sendJson, startServer } from './server';

const trans = {
  __: (text: string, ...args: unknown[]) =>
    args.reduce<string>((t, a, i) => t.replace(`%${i + 1}`, String(a)), text),
  _n: (one: string, many: string, n: number) =>
    (n === 1 ? one : many).replace('%1', String(n))
} as unknown as Parameters<typeof describePreview>[1];

const ANSWER = {
  backend: 'local',
  gpus: [],
  changes: [
    { id: 'a1', name: 'exp-12', priority: 'low', action: 'preempt' },
    {
      id: 'b2',
      name: 'exp-9',
      priority: 'low',
      action: 'shrink',
      replicas: 4,
      to: 2
    }
  ],
  ahead: 0
};

describe('what a new run would preempt', () => {
  let server: ITestServer;
  afterEach(() => server?.close());

  it('asks the server with the GPUs and priority and reads its answer', async () => {
    server = await startServer((_req, res) => sendJson(res, 200, ANSWER));
    const api = new KubelabApi(server.url + 'base/kubelab/api', (url, init) =>
      fetch(url, init)
    );
    const preview = await api.preview('2', 'high');
    expect(server.requests[0].url).toBe(
      '/base/kubelab/api/resources/preview?gpus=2&priority=high'
    );
    expect(describePreview(preview, trans)).toBe(
      'would preempt exp-12 (low), shrink exp-9 from 4 to 2'
    );
  });

  it("shows a refusal with the field it names (the server's 422)", async () => {
    server = await startServer((_req, res) =>
      sendJson(res, 422, {
        error: 'invalid',
        detail: 'invalid preview request',
        fields: [{ path: 'gpus', reason: 'must be more than 0' }]
      })
    );
    const api = new KubelabApi(server.url + 'kubelab/api', (url, init) =>
      fetch(url, init)
    );
    const refused = await api.preview('0', 'high').catch(reason => reason);
    expect(refused).toBeInstanceOf(KubelabApiError);
    expect(describeError(refused)).toBe(
      'invalid preview request\ngpus: must be more than 0'
    );
  });

  it('says when it would start at once, or wait, and who is ahead', () => {
    const free = parsePreview({ ...ANSWER, gpus: [0, 1], changes: [] });
    expect(describePreview(free, trans)).toBe('would start now on GPU 0,1');
    const waits = parsePreview({ ...ANSWER, changes: [], ahead: 2 });
    expect(describePreview(waits, trans)).toBe(
      'would wait: no GPUs are free and no run it may preempt holds them' +
        ' (once the 2 runs queued before it have started)'
    );
    const unnamed = parsePreview({
      ...ANSWER,
      changes: [{ id: 'c3', name: null, priority: '500', action: 'preempt' }]
    });
    expect(describePreview(unnamed, trans)).toBe('would preempt c3 (500)');
  });

  it('refuses an answer of another shape', () => {
    expect(() => parsePreview({ gpus: [] })).toThrow('preview');
    expect(() =>
      parsePreview({ ...ANSWER, changes: [{ id: 'x', action: 'delete' }] })
    ).toThrow('preview.changes[0]');
  });
});

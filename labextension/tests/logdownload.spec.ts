import { KubelabApi } from '../src/api';
import { logFile } from '../src/logdownload';
import { ITestServer, startServer } from './server';

const PLAIN = 'epoch 0\nepoch 1\n';
const TIMED =
  '2026-11-24T01:07:54.123456Z epoch 0\n2026-11-24T01:07:55.5Z epoch 1\n';

describe('logFile', () => {
  let server: ITestServer;
  let api: KubelabApi;

  beforeEach(async () => {
    server = await startServer((request, res) => {
      res.writeHead(200, { 'Content-Type': 'text/plain; charset=utf-8' });
      res.end(request.url.includes('timestamps=1') ? TIMED : PLAIN);
    });
    api = new KubelabApi(server.url + 'kubelab/api', (url, init) =>
      fetch(url, init)
    );
  });

  afterEach(() => server.close());

  const run = { name: 'mnist', id: '0mz8k3c2qf7a' };

  it.each([
    [
      true,
      1,
      'mnist-0mz8k3c2qf7a-replica1-timestamps.log',
      TIMED,
      '&timestamps=1'
    ],
    [false, 0, 'mnist-0mz8k3c2qf7a-replica0.log', PLAIN, ''],
    [false, 'build' as const, 'mnist-0mz8k3c2qf7a-build.log', PLAIN, '']
  ])(
    'saves the log as shown (times shown: %s), under a name that says which',
    async (timestamps, replica, filename, text, query) => {
      expect(await logFile(api, run, replica, timestamps)).toEqual({
        filename,
        text
      });
      expect(server.requests.map(r => r.url)).toEqual([
        `/kubelab/api/experiments/0mz8k3c2qf7a/logs?replica=${replica}${query}`
      ]);
    }
  );

  it('fails with the server reason', async () => {
    await server.close();
    server = await startServer((_request, res) => {
      res.writeHead(404, { 'Content-Type': 'application/json' });
      res.end(JSON.stringify({ error: 'not found', detail: 'no run' }));
    });
    api = new KubelabApi(server.url + 'kubelab/api', (url, init) =>
      fetch(url, init)
    );
    await expect(logFile(api, run, 0, true)).rejects.toThrow(
      'not found: no run'
    );
  });
});

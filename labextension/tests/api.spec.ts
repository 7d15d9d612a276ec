import { KubelabApi, KubelabApiError } from '../src/api';
import { RecordFormatError } from '../src/model';
import {
  ITestServer,
  openEventStream,
  record,
  sendJson,
  startServer,
  waitFor
} from './server';

describe('KubelabApi', () => {
  let server: ITestServer;
  let api: KubelabApi;

  const serve = async (handler: Parameters<typeof startServer>[0]) => {
    server = await startServer(handler);
    api = new KubelabApi(server.url + 'base/kubelab/api', (url, init) =>
      fetch(url, init)
    );
  };

  afterEach(() => server.close());

  it('lists experiments, passing query and sort', async () => {
    await serve((_req, res) =>
      sendJson(res, 200, { items: [record()], total: 1 })
    );
    const items = await api.listExperiments('status = Running', '-created');
    expect(items.map(item => item.id)).toEqual(['0mz8k3c2qf7a']);
    const { method, url } = server.requests[0];
    expect(method).toBe('GET');
    expect(url).toBe(
      '/base/kubelab/api/experiments?query=status+%3D+Running&sort=-created'
    );
  });

  it('lists without a query string when there is nothing to filter', async () => {
    await serve((_req, res) => sendJson(res, 200, { items: [], total: 0 }));
    expect(await api.listExperiments()).toEqual([]);
    expect(server.requests[0].url).toBe('/base/kubelab/api/experiments');
  });

  it('passes the abort signal of a list request on', async () => {
    await serve((_req, res) => sendJson(res, 200, { items: [], total: 0 }));
    const controller = new AbortController();
    controller.abort();
    await expect(
      api.listExperiments('', '', controller.signal)
    ).rejects.toMatchObject({ name: 'AbortError' });
  });

  it('submits a spec as JSON and returns the created record', async () => {
    await serve((_req, res) => sendJson(res, 201, record({ name: 'x' })));
    const spec = {
      name: 'x',
      command: ['python', 'train.py'],
      resources: { gpus: 0 }
    };
    const created = await api.submit(spec);
    expect(created.name).toBe('x');
    const sent = server.requests[0];
    expect([sent.method, sent.url]).toEqual([
      'POST',
      '/base/kubelab/api/experiments'
    ]);
    expect(sent.headers['content-type']).toBe('application/json');
    expect(JSON.parse(sent.body)).toEqual(spec);
  });

  it('turns a 4xx answer into an error carrying the fields', async () => {
    await serve((_req, res) =>
      sendJson(res, 400, {
        error: 'invalid experiment',
        detail: 'resources.gpus must be a whole number',
        fields: [
          { path: 'resources.gpus', reason: 'expected an integer' },
          { bogus: 1 }
        ]
      })
    );
    const failure = api.submit({
      command: ['python'],
      resources: { gpus: 'two' }
    });
    await expect(failure).rejects.toThrow(KubelabApiError);
    const error = (await failure.catch(e => e)) as KubelabApiError;
    expect(error.status).toBe(400);
    expect(error.message).toBe(
      'invalid experiment: resources.gpus must be a whole number'
    );
    expect(error.fields).toEqual([
      { path: 'resources.gpus', reason: 'expected an integer' }
    ]);
  });

  it('posts a traffic split to the service’s name and reads every version back', async () => {
    const view = (version: string, traffic: number) => ({
      id: `iris-v${version}`,
      name: 'iris',
      version,
      state: 'Running',
      url: 'http://iris.user-alice.svc:8080/',
      traffic
    });
    await serve((_req, res) =>
      sendJson(res, 200, { items: [view('1', 90), view('2', 10)] })
    );
    const views = await api.setTraffic('iris', { '2': 10 });
    expect(views.map(v => [v.id, v.traffic])).toEqual([
      ['iris-v1', 90],
      ['iris-v2', 10]
    ]);
    const { method, url, body } = server.requests[0];
    expect([method, url]).toEqual([
      'POST',
      '/base/kubelab/api/services/iris/traffic'
    ]);
    expect(JSON.parse(body)).toEqual({ traffic: { '2': 10 }, mirror: {} });
  });

  it('posts the mirror beside the split and reads each version’s copied share back', async () => {
    await serve((_req, res) =>
      sendJson(res, 200, {
        items: [
          {
            id: 'iris-v1',
            name: 'iris',
            version: '1',
            state: 'Running',
            url: 'http://iris/',
            traffic: 100,
            mirror: 0
          },
          {
            id: 'iris-v2',
            name: 'iris',
            version: '2',
            state: 'Running',
            url: 'http://iris/',
            traffic: 0,
            mirror: 100
          }
        ]
      })
    );
    const views = await api.setTraffic('iris', { '1': 100 }, { '2': 100 });
    expect(views.map(v => [v.id, v.mirror])).toEqual([
      ['iris-v1', 0],
      ['iris-v2', 100]
    ]);
    expect(JSON.parse(server.requests[0].body)).toEqual({
      traffic: { '1': 100 },
      mirror: { '2': 100 }
    });
  });

  it('passes a refused split’s fields on', async () => {
    await serve((_req, res) =>
      sendJson(res, 422, {
        error: 'invalid',
        detail: 'invalid traffic',
        fields: [{ path: 'traffic.3', reason: 'service iris has no version 3' }]
      })
    );
    const error = (await api
      .setTraffic('iris', { '3': 10 })
      .catch(e => e)) as KubelabApiError;
    expect([error.status, error.fields[0].path]).toEqual([422, 'traffic.3']);
  });

  it('keeps a non-JSON error body readable', async () => {
    await serve((_req, res) => {
      res.writeHead(502, 'Bad Gateway', { 'Content-Type': 'text/html' });
      res.end('<h1>proxy down</h1>\n');
    });
    const error = (await api
      .listExperiments()
      .catch(e => e)) as KubelabApiError;
    expect(error).toBeInstanceOf(KubelabApiError);
    expect([error.status, error.error, error.detail]).toEqual([
      502,
      'Bad Gateway',
      '<h1>proxy down</h1>'
    ]);
    expect(error.fields).toEqual([]);
  });

  it('rejects a 200 answer that is not JSON, naming the request', async () => {
    await serve((_req, res) => res.writeHead(200).end('<html></html>'));
    await expect(api.listExperiments()).rejects.toThrow(
      new RecordFormatError(
        'GET experiments',
        'the server did not answer with JSON'
      )
    );
  });

  it('rejects a list whose items break the contract', async () => {
    await serve((_req, res) =>
      sendJson(res, 200, { items: [record({ status: 'Done' })] })
    );
    await expect(api.listExperiments()).rejects.toThrow(
      'response.items[0].status'
    );
  });

  it('stops and deletes by id, escaping it into the path', async () => {
    await serve((req, res) =>
      req.method === 'DELETE'
        ? res.writeHead(204).end()
        : sendJson(res, 200, record({ status: 'Stopped' }))
    );
    expect((await api.stop('a/b')).status).toBe('Stopped');
    await api.remove('0mz8k3c2qf7a');
    expect(server.requests.map(r => `${r.method} ${r.url}`)).toEqual([
      'POST /base/kubelab/api/experiments/a%2Fb/stop',
      'DELETE /base/kubelab/api/experiments/0mz8k3c2qf7a'
    ]);
  });

  it('reads and acts on pipelines, schedules and a diff by escaped ids', async () => {
    await serve((req, res) => {
      const url = req.url ?? '';
      if (req.method === 'DELETE') {
        res.writeHead(204).end();
      } else if (url.endsWith('/pipelines') || url.endsWith('/schedules')) {
        sendJson(res, 200, { items: [{ id: 'p1', name: 'nightly' }] });
      } else if (url.includes('/diff?')) {
        sendJson(res, 200, { a: { id: 'a' }, b: { id: 'b' }, params: [] });
      } else {
        sendJson(res, 200, { id: 'p/1', name: 'nightly', state: 'Stopped' });
      }
    });
    expect((await api.pipelines()).map(p => p.name)).toEqual(['nightly']);
    expect((await api.schedules()).map(s => s.id)).toEqual(['p1']);
    expect((await api.pipeline('p/1')).id).toBe('p/1');
    await api.pipelineAction('p/1', 'stop');
    await api.scheduleAction('s 1', 'pause');
    await api.deleteSchedule('s 1');
    expect((await api.diff('a&b', 'c')).params).toEqual([]);
    expect(server.requests.map(r => `${r.method} ${r.url}`)).toEqual([
      'GET /base/kubelab/api/pipelines',
      'GET /base/kubelab/api/schedules',
      'GET /base/kubelab/api/pipelines/p%2F1',
      'POST /base/kubelab/api/pipelines/p%2F1/stop',
      'POST /base/kubelab/api/schedules/s%201/pause',
      'DELETE /base/kubelab/api/schedules/s%201',
      'GET /base/kubelab/api/diff?a=a%26b&b=c'
    ]);
  });

  it("names the server's reason when a schedule action is refused", async () => {
    await serve((_req, res) =>
      sendJson(res, 409, { error: 'schedule is paused', detail: 'nightly' })
    );
    await expect(api.scheduleAction('s1', 'pause')).rejects.toThrow(
      'schedule is paused: nightly'
    );
  });

  it('reports a failed delete', async () => {
    await serve((_req, res) =>
      sendJson(res, 404, { error: 'no such experiment', detail: 'x' })
    );
    await expect(api.remove('x')).rejects.toThrow('no such experiment: x');
  });

  it('reads the resource summary, filling what an older server leaves out', async () => {
    await serve((_req, res) =>
      sendJson(res, 200, { backend: 'local', gpus: { total: 2 } })
    );
    expect(await api.resources()).toEqual({
      backend: 'local',
      gpus: { total: 2, free: 2, types: [], queue: [] }
    });
    expect(server.requests[0].url).toBe('/base/kubelab/api/resources');
  });

  it('reads GPU types given as names or as ledger entries', async () => {
    await serve((_req, res) =>
      sendJson(res, 200, {
        backend: 'local',
        gpus: {
          total: 3,
          free: 1,
          types: [{ type: 'T4', total: 2, free: 0, extra: 1 }, 'A100']
        }
      })
    );
    expect((await api.resources()).gpus.types).toEqual([
      { name: 'T4', total: 2, free: 0 },
      { name: 'A100', total: null, free: null }
    ]);
  });

  it.each([
    [{ gpus: { total: 0 } }, 'resources.backend: expected a string'],
    [{ backend: 'local' }, 'resources.gpus.total: expected a number'],
    [
      { backend: 'local', gpus: { total: 1, types: [{ total: 1 }] } },
      'resources.gpus.types[0]: expected a name or an object'
    ]
  ])('rejects a malformed resource summary %j', async (body, message) => {
    await serve((_req, res) => sendJson(res, 200, body));
    await expect(api.resources()).rejects.toThrow(message);
  });

  it('opens the event stream on the events endpoint', async () => {
    await serve((_req, res) => {
      openEventStream(res);
      res.write('event: deleted\ndata: {"id": "a"}\n\n');
    });
    const received: string[] = [];
    const stream = api.events({
      onConnect: async () => undefined,
      onEvent: event => received.push(`${event.event} ${event.data}`)
    });
    stream.start();
    await waitFor(() => received.length === 1, 'an event');
    await stream.stop();
    expect(received).toEqual(['deleted {"id": "a"}']);
    expect(server.requests[0].url).toBe('/base/kubelab/api/events');
    expect(server.requests[0].headers.accept).toBe('text/event-stream');
  });
});

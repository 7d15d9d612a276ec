import http from 'http';

import { KubelabApi } from '../src/api';
import { LiveStore } from '../src/store';
import {
  ITestServer,
  openEventStream,
  record,
  sendJson,
  startServer,
  waitFor
} from './server';

/**
 * The store against a real HTTP server: the event stream is merged into the current
 * query, including the events that arrive while a filtered list is in flight.
 */
describe('LiveStore', () => {
  let server: ITestServer;
  let store: LiveStore;
  let stream: http.ServerResponse | null = null;
  let held: (() => void) | null = null;
  let sweeps: Record<string, unknown>[] = [];
  let services: Record<string, unknown>[] = [];

  const send = (event: string, data: unknown) =>
    stream?.write(`event: ${event}\ndata: ${JSON.stringify(data)}\n\n`);

  beforeEach(async () => {
    // Each test starts from empty lists: a service left running by the one before
    // would start the store's traffic timer at its default period, before a test sets it.
    sweeps = [];
    services = [];
    held = null;
    stream = null;
    const kept = record({ id: 'kept00000001', name: 'kept' });
    server = await startServer((request, response) => {
      const url = new URL(request.url, 'http://x');
      if (url.pathname.endsWith('/events')) {
        openEventStream(response);
        stream = response;
      } else if (url.pathname.endsWith('/experiments')) {
        const query = url.searchParams.get('query') ?? '';
        const items = query ? [kept] : [kept, record()];
        const answer = () => sendJson(response, 200, { items, total: 2 });
        if (query) {
          held = answer; // the test decides when the filtered list lands
        } else {
          answer();
        }
      } else if (url.pathname.endsWith('/sweeps')) {
        sendJson(response, 200, { items: sweeps, total: sweeps.length });
      } else if (url.pathname.endsWith('/services')) {
        sendJson(response, 200, { items: services });
      } else if (url.pathname.endsWith('/resources')) {
        sendJson(response, 200, { backend: 'local', gpus: { total: 0 } });
      } else {
        sendJson(response, 200, { items: [] });
      }
    });
    const api = new KubelabApi(server.url + 'kubelab/api/', (url, init) =>
      fetch(url, init)
    );
    store = new LiveStore(api);
    store.start();
    await waitFor(() => store.table.rows.length === 2, 'the first list');
  });

  afterEach(async () => {
    await store.dispose();
    await server.close();
  });

  it('replays events that arrive while a filtered list is in flight', async () => {
    const applied = store.setQuery('name:kept');
    await waitFor(() => held !== null, 'the filtered request');
    send(
      'experiment',
      record({ id: 'kept00000001', name: 'kept', status: 'Running' })
    );
    send('experiment', record({ id: 'noise0000001', name: 'noise' }));
    await waitFor(
      () =>
        store.table.rows.some(
          r => r.id === 'kept00000001' && r.status === 'Running'
        ),
      'the event on the old table'
    );
    held?.();
    await applied;
    // The list was read before the event: the event wins, and the new run that fails
    // the filter is not shown (only the server evaluates PQL; it is asked again).
    expect(store.table.rows.map(r => [r.id, r.status])).toEqual([
      ['kept00000001', 'Running']
    ]);
  });

  it('tells sweep views what a reconnection found changed', async () => {
    const sweep = (status: string) => ({
      id: 'sweep0000001',
      name: 'grid',
      status,
      objective: { metric: 'loss', direction: 'minimize' }
    });
    sweeps = [sweep('Running')];
    await store.refresh();
    const heard: string[] = [];
    store.sweepChanged.connect((_, record) => heard.push(record.status));
    sweeps = [sweep('Succeeded')]; // finished while the stream was down: no event came
    await store.refresh();
    await store.refresh(); // nothing changed since: nothing more to tell
    expect(heard).toEqual(['Succeeded']);
  });

  it('follows services from their list and their events', async () => {
    const service = (id: string, state: string, day: number) => ({
      id,
      name: 'iris',
      version: id.slice(-1),
      state,
      url: `/kubelab/services/${id}/`,
      created_at: `2026-01-0${day}T00:00:00Z`
    });
    services = [service('iris-v1', 'Running', 1)];
    await store.refresh();
    expect(store.services.map(s => [s.id, s.state])).toEqual([
      ['iris-v1', 'Running']
    ]);
    send('service', service('iris-v2', 'Pending', 2));
    await waitFor(() => store.services.length === 2, 'the new service');
    expect(store.services.map(s => s.id)).toEqual(['iris-v2', 'iris-v1']);
    send('service', service('iris-v2', 'Running', 2));
    await waitFor(
      () => store.service('iris-v2')?.state === 'Running',
      'iris-v2 Running'
    );
    send('service_deleted', { id: 'iris-v1' });
    await waitFor(() => store.services.length === 1, 'iris-v1 gone');
    expect(store.service('iris-v2')?.replicas).toEqual([]);
  });

  it('reads the services again for their traffic figures while one runs', async () => {
    const stats = (requests: number) => ({
      window_s: 60,
      requests,
      rate: requests / 60,
      p50_ms: requests ? 12 : null,
      p95_ms: requests ? 30 : null,
      errors: 0
    });
    const busy = (requests: number) => ({
      id: 'busy-v1',
      name: 'busy',
      version: '1',
      state: 'Running',
      url: '/kubelab/services/busy-v1/',
      created_at: '2026-01-01T00:00:00Z',
      stats: stats(requests)
    });
    store.serviceStatsMs = 20;
    services = [busy(0)];
    await store.refresh();
    expect(store.service('busy-v1')?.stats?.requests).toBe(0);
    services = [busy(3)];
    await waitFor(
      () => store.service('busy-v1')?.stats?.requests === 3,
      'the figures read again'
    );
    const event: Record<string, unknown> = busy(3);
    delete event.stats; // a view as the event stream sends it
    send('service', { ...event, replicas: [{ index: 0, state: 'Ready' }] });
    await waitFor(
      () => store.service('busy-v1')?.replicas.length === 1,
      'the event applied'
    );
    expect(store.service('busy-v1')?.stats?.p50_ms).toBe(12); // an event has none: kept
  });
});

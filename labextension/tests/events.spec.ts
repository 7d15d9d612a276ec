import {
  backoffDelay,
  EventStream,
  EventStreamParser,
  IEventStreamOptions,
  IServerSentEvent,
  StreamState
} from '../src/events';
import { ITestServer, openEventStream, startServer, waitFor } from './server';

describe('EventStreamParser', () => {
  it('dispatches an event at the blank line, with its name and data', () => {
    const parser = new EventStreamParser();
    expect(parser.push('event: experiment\ndata: {"id": 1}\n')).toEqual([]);
    expect(parser.push('\n')).toEqual([
      { event: 'experiment', data: '{"id": 1}', id: null }
    ]);
  });

  it('reassembles lines split across chunks at any byte', () => {
    const text =
      'event: deleted\r\ndata: {"id":"x"}\r\n\r\nevent: experiment\rdata: 2\r\r';
    for (let cut = 1; cut < text.length; cut++) {
      const parser = new EventStreamParser();
      const events = [
        ...parser.push(text.slice(0, cut)),
        ...parser.push(text.slice(cut))
      ];
      expect(events).toEqual([
        { event: 'deleted', data: '{"id":"x"}', id: null },
        { event: 'experiment', data: '2', id: null }
      ]);
    }
  });

  it('skips comments such as the `: ping` heartbeat', () => {
    const parser = new EventStreamParser();
    expect(parser.push(': ping\n\n: ping\n\n')).toEqual([]);
  });

  it('joins multi-line data, defaults the name, and keeps the last id', () => {
    const parser = new EventStreamParser();
    expect(parser.push('id: 7\ndata: a\ndata:b\ndata\n\n')).toEqual([
      { event: 'message', data: 'a\nb\n', id: '7' }
    ]);
    expect(parser.push('data: c\n\n')).toEqual([
      { event: 'message', data: 'c', id: '7' }
    ]);
  });

  it('resets the event name after each dispatch and drops events without data', () => {
    const parser = new EventStreamParser();
    expect(parser.push('event: experiment\n\ndata: x\n\n')).toEqual([
      { event: 'message', data: 'x', id: null }
    ]);
  });

  it('does not dispatch an event the stream has not finished', () => {
    const parser = new EventStreamParser();
    expect(parser.push('event: experiment\ndata: {"id"')).toEqual([]);
  });

  it('reads a numeric retry and ignores a malformed one', () => {
    const parser = new EventStreamParser();
    parser.push('retry: 250\n');
    expect(parser.retry).toBe(250);
    parser.push('retry: soon\n');
    expect(parser.retry).toBe(250);
  });
});

describe('backoffDelay', () => {
  it('doubles from the initial delay up to the cap', () => {
    expect([0, 1, 2, 3, 4, 10].map(n => backoffDelay(n, 100, 1000))).toEqual([
      100, 200, 400, 800, 1000, 1000
    ]);
  });
});

/** Drive an EventStream against a real server and record what it reports. */
class Harness {
  events: IServerSentEvent[] = [];
  states: StreamState[] = [];
  connects = 0;
  stream: EventStream;

  constructor(
    server: ITestServer,
    overrides: Partial<IEventStreamOptions> = {},
    onConnect: (
      attempt: number,
      signal: AbortSignal
    ) => Promise<void> = async () => undefined
  ) {
    this.stream = new EventStream({
      open: signal => fetch(server.url + 'events', { signal }),
      onConnect: signal => onConnect(++this.connects, signal),
      onEvent: event => this.events.push(event),
      onStateChange: state => this.states.push(state),
      initialDelayMs: 10,
      maxDelayMs: 40,
      ...overrides
    });
  }

  kinds(): string[] {
    return this.states.map(state => state.kind);
  }

  errors(): string[] {
    return this.states.flatMap(state =>
      state.kind === 'waiting' ? [state.error] : []
    );
  }
}

describe('EventStream', () => {
  let server: ITestServer;
  let harness: Harness | null = null;

  afterEach(async () => {
    await harness?.stream.stop();
    harness = null;
    await server.close();
  });

  it('refetches once per connection and holds events until the list is loaded', async () => {
    server = await startServer((_req, res) => {
      openEventStream(res);
      res.write('event: experiment\ndata: 1\n\n');
    });
    let releaseList!: () => void;
    harness = new Harness(
      server,
      {},
      () => new Promise<void>(resolve => (releaseList = resolve))
    );
    harness.stream.start();
    await waitFor(
      () => server.open.length === 1 && releaseList !== undefined,
      'a connection'
    );
    server.open[0].write(': ping\n\nevent: experiment\ndata: 2\n\n');
    // The events are in flight but must not be delivered before the list.
    await new Promise(resolve => setTimeout(resolve, 50));
    expect(harness.events).toEqual([]);
    releaseList();
    await waitFor(() => harness!.events.length === 2, 'the held events');
    expect(harness.events.map(e => e.data)).toEqual(['1', '2']);
    expect(harness.kinds()).toEqual(['connecting', 'live']);
    server.open[0].write('event: deleted\ndata: 3\n\n');
    await waitFor(() => harness!.events.length === 3, 'a live event');
    expect(harness.connects).toBe(1);
  });

  it('reconnects after the server closes the stream and refetches the list', async () => {
    server = await startServer((_req, res, index) => {
      openEventStream(res);
      res.write(`data: connection ${index}\n\n`);
      if (index === 0) {
        res.end();
      }
    });
    harness = new Harness(server);
    harness.stream.start();
    await waitFor(() => harness!.events.length === 2, 'two connections');
    expect(harness.events.map(e => e.data)).toEqual([
      'connection 0',
      'connection 1'
    ]);
    expect(harness.connects).toBe(2);
    expect(harness.errors()).toEqual(['the server closed the event stream']);
  });

  it('reports an HTTP error, backs off, and recovers', async () => {
    server = await startServer((_req, res, index) => {
      if (index < 3) {
        res.writeHead(403).end('forbidden');
        return;
      }
      openEventStream(res);
      res.write('data: ok\n\n');
    });
    harness = new Harness(server);
    harness.stream.start();
    await waitFor(() => harness!.events.length === 1, 'recovery');
    expect(harness.errors()).toEqual(
      Array(3).fill('event stream request failed: HTTP 403')
    );
    const delays = harness.states.flatMap(s =>
      s.kind === 'waiting' ? [s.retryInMs] : []
    );
    expect(delays).toEqual([10, 20, 40]);
    expect(harness.connects).toBe(1); // the list is only fetched once the stream is open
  });

  it('uses the delay the server asks for with retry:', async () => {
    server = await startServer((_req, res, index) => {
      openEventStream(res);
      res.end(index === 0 ? 'retry: 25\ndata: first\n\n' : 'data: again\n\n');
    });
    harness = new Harness(server, { initialDelayMs: 1 });
    harness.stream.start();
    await waitFor(() => harness!.events.length >= 2, 'a reconnection');
    const waiting = harness.states.find(s => s.kind === 'waiting');
    expect(waiting).toEqual(expect.objectContaining({ retryInMs: 25 }));
  });

  it('rejects a response that is not an event stream', async () => {
    server = await startServer((_req, res) => {
      res
        .writeHead(200, { 'Content-Type': 'text/html' })
        .end('<html>login</html>');
    });
    harness = new Harness(server);
    harness.stream.start();
    await waitFor(() => harness!.errors().length > 0, 'an error');
    expect(harness.errors()[0]).toBe(
      'event stream has content type "text/html", not text/event-stream'
    );
    expect(harness.connects).toBe(0);
  });

  it('treats a failed list fetch as a failed connection and tries again', async () => {
    server = await startServer((_req, res) => {
      openEventStream(res);
      res.write('data: x\n\n');
    });
    harness = new Harness(server, {}, async attempt => {
      if (attempt === 1) {
        throw new Error('list failed: HTTP 500');
      }
    });
    harness.stream.start();
    await waitFor(
      () => harness!.events.length === 1,
      'an event after the retry'
    );
    expect(harness.errors()).toEqual(['list failed: HTTP 500']);
    expect(harness.connects).toBe(2);
    expect(server.requests.length).toBe(2);
  });

  it('reconnects when even the heartbeat stops arriving', async () => {
    server = await startServer((_req, res, index) => {
      openEventStream(res);
      if (index > 0) {
        res.write('data: fresh\n\n');
      }
    });
    harness = new Harness(server, { idleTimeoutMs: 100 });
    harness.stream.start();
    await waitFor(() => harness!.events.length === 1, 'a fresh connection');
    expect(harness.errors()[0]).toBe(
      'no data from the event stream for 100 ms'
    );
  });

  it('drops a list that arrives after its connection has died', async () => {
    server = await startServer((_req, res, index) => {
      openEventStream(res);
      if (index > 0) {
        res.write('data: fresh\n\n');
      }
    });
    let releaseStale!: () => void;
    let staleSignal!: AbortSignal;
    harness = new Harness(server, { idleTimeoutMs: 100 }, (attempt, signal) => {
      if (attempt > 1) {
        return Promise.resolve();
      }
      staleSignal = signal;
      return new Promise<void>(resolve => (releaseStale = resolve));
    });
    harness.stream.start();
    await waitFor(() => harness!.events.length === 1, 'the second connection');
    expect(staleSignal.aborted).toBe(true);
    releaseStale();
    await new Promise(resolve => setTimeout(resolve, 20));
    expect(harness.kinds()).toEqual([
      'connecting',
      'waiting',
      'connecting',
      'live'
    ]);
    expect(harness.events.map(e => e.data)).toEqual(['fresh']);
  });

  it('reports a network failure and keeps trying', async () => {
    server = await startServer(() => undefined);
    const url = server.url;
    await server.close();
    harness = new Harness({ ...server, url });
    harness.stream.start();
    await waitFor(() => harness!.errors().length >= 2, 'two failed attempts');
    expect(harness.errors()[0]).toMatch(/fetch failed/);
    server = await startServer(() => undefined);
  });

  it('stop() closes the connection and delivers nothing afterwards', async () => {
    server = await startServer((_req, res) => openEventStream(res));
    harness = new Harness(server);
    harness.stream.start();
    await waitFor(() => harness!.kinds().includes('live'), 'a live stream');
    const response = server.open[0];
    await harness.stream.stop();
    expect(harness.stream.isRunning).toBe(false);
    expect(harness.kinds().slice(-1)).toEqual(['stopped']);
    await waitFor(
      () => response.destroyed || response.closed,
      'the server to see the close'
    );
    expect(harness.events).toEqual([]);
    expect(server.requests.length).toBe(1);
  });
});

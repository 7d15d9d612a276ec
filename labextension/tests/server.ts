/**
 * A real HTTP server on a free port for the client tests: each test installs a
 * handler, and every request is recorded with its body.
 */
import http from 'http';
import { AddressInfo } from 'net';

export interface IRecordedRequest {
  method: string;
  url: string;
  headers: http.IncomingHttpHeaders;
  body: string;
}

export type Handler = (
  request: IRecordedRequest,
  response: http.ServerResponse,
  index: number
) => void;

export interface ITestServer {
  url: string;
  requests: IRecordedRequest[];
  /** Responses still open (event streams), so tests can write to or end them. */
  open: http.ServerResponse[];
  close(): Promise<void>;
}

export async function startServer(handler: Handler): Promise<ITestServer> {
  const requests: IRecordedRequest[] = [];
  const open: http.ServerResponse[] = [];
  const server = http.createServer((req, res) => {
    const chunks: Buffer[] = [];
    req.on('data', chunk => chunks.push(chunk));
    req.on('end', () => {
      const recorded = {
        method: req.method ?? '',
        url: req.url ?? '',
        headers: req.headers,
        body: Buffer.concat(chunks).toString('utf8')
      };
      requests.push(recorded);
      open.push(res);
      res.on('close', () => open.splice(open.indexOf(res), 1));
      handler(recorded, res, requests.length - 1);
    });
  });
  await new Promise<void>(resolve => server.listen(0, '127.0.0.1', resolve));
  const { port } = server.address() as AddressInfo;
  return {
    url: `http://127.0.0.1:${port}/`,
    requests,
    open,
    close: () =>
      new Promise<void>(resolve => {
        server.closeAllConnections();
        server.close(() => resolve());
      })
  };
}

export function sendJson(
  res: http.ServerResponse,
  status: number,
  body: unknown
): void {
  res.writeHead(status, { 'Content-Type': 'application/json' });
  res.end(JSON.stringify(body));
}

export function openEventStream(res: http.ServerResponse): void {
  res.writeHead(200, {
    'Content-Type': 'text/event-stream',
    'Cache-Control': 'no-cache'
  });
  res.flushHeaders();
}

/** Resolve once `predicate` holds, checking after every event-loop turn. */
export async function waitFor(
  predicate: () => boolean,
  what: string
): Promise<void> {
  const deadline = Date.now() + 10000;
  while (!predicate()) {
    if (Date.now() > deadline) {
      throw new Error(`timed out waiting for ${what}`);
    }
    await new Promise(resolve => setTimeout(resolve, 5));
  }
}

/** A record as the server sends it, with overrides. */
export function record(
  overrides: Record<string, unknown> = {}
): Record<string, unknown> {
  return {
    id: '0mz8k3c2qf7a',
    name: 'train',
    status: 'Pending',
    reason: 'submitted',
    exit_code: null,
    created_at: '2026-11-21T19:30:00.123Z',
    started_at: null,
    finished_at: null,
    duration: null,
    params: {},
    tags: [],
    sweep: null,
    trial: null,
    metrics: {},
    step: null,
    resources: { gpus: 0, gpu_type: null, cpu: null, memory: null },
    replicas: 1,
    framework: 'none',
    backend: 'local',
    ...overrides
  };
}

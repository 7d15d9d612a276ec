/**
 * The client for the server extension's REST API (`<base>/kubelab/api/...`).
 *
 * Requests go through a `RequestFunction` the plugin builds from JupyterLab's
 * `ServerConnection.makeRequest`, which adds the token and XSRF headers; tests pass
 * plain `fetch`. Errors come back as `KubelabApiError` carrying the server's
 * `{error, detail, fields}` so dialogs can point at the offending field.
 */
import { EventStream, IEventStreamOptions } from './events';
import {
  IExperimentRecord,
  parseList,
  parseRecord,
  RecordFormatError
} from './model';

export type RequestFunction = (
  url: string,
  init: RequestInit
) => Promise<Response>;

/** A field-level complaint from the server, e.g. `{path: 'resources.gpus', reason: ...}`. */
export interface IFieldError {
  path: string;
  reason: string;
}

/** One kind of GPU on the backend, e.g. `{name: 'T4', total: 2, free: 1}`. */
export interface IGpuType {
  name: string;
  total: number | null;
  free: number | null;
}

/** GPU and backend summary from `GET kubelab/api/resources`. */
export interface IResources {
  backend: string;
  gpus: { total: number; free: number; types: IGpuType[] };
}

/** What `POST kubelab/api/experiments` accepts; the server validates the rest. */
export interface IExperimentSpec {
  name?: string;
  command: string[];
  resources?: Record<string, unknown>;
  [key: string]: unknown;
}

export class KubelabApiError extends Error {
  constructor(
    readonly status: number,
    readonly error: string,
    readonly detail: string,
    readonly fields: IFieldError[] = []
  ) {
    super(detail ? `${error}: ${detail}` : error);
    this.name = 'KubelabApiError';
  }

  /** Build the error from a non-2xx response, whatever its body looks like. */
  static async fromResponse(response: Response): Promise<KubelabApiError> {
    const text = await response.text().catch(() => '');
    let body: unknown = null;
    try {
      body = JSON.parse(text);
    } catch {
      // not JSON: a proxy page or a traceback; fall through with the raw text
    }
    if (typeof body === 'object' && body !== null && 'error' in body) {
      const { error, detail, fields } = body as Record<string, unknown>;
      return new KubelabApiError(
        response.status,
        String(error),
        typeof detail === 'string' ? detail : '',
        Array.isArray(fields) ? fields.filter(isFieldError) : []
      );
    }
    const reason = response.statusText || `HTTP ${response.status}`;
    return new KubelabApiError(
      response.status,
      reason,
      text.trim().slice(0, 500)
    );
  }
}

function isFieldError(value: unknown): value is IFieldError {
  const field = value as IFieldError;
  return (
    typeof value === 'object' &&
    value !== null &&
    typeof field.path === 'string' &&
    typeof field.reason === 'string'
  );
}

/**
 * Check a resource summary. GPU types come as names or as `{type, total, free}`
 * objects (the local backend's ledger); both become `IGpuType`.
 */
export function parseResources(value: unknown): IResources {
  const body = value as {
    backend?: unknown;
    gpus?: Record<string, unknown>;
  } | null;
  const gpus = body?.gpus;
  if (typeof body?.backend !== 'string') {
    throw new RecordFormatError('resources.backend', 'expected a string');
  }
  if (typeof gpus?.total !== 'number') {
    throw new RecordFormatError('resources.gpus.total', 'expected a number');
  }
  const types = Array.isArray(gpus.types) ? gpus.types : [];
  return {
    backend: body.backend,
    gpus: {
      total: gpus.total,
      free: typeof gpus.free === 'number' ? gpus.free : gpus.total,
      types: types.map((entry, index) => parseGpuType(entry, index))
    }
  };
}

function parseGpuType(entry: unknown, index: number): IGpuType {
  if (typeof entry === 'string') {
    return { name: entry, total: null, free: null };
  }
  const { type, name, total, free } = (entry ?? {}) as Record<string, unknown>;
  const label = typeof type === 'string' ? type : name;
  if (typeof label !== 'string') {
    throw new RecordFormatError(
      `resources.gpus.types[${index}]`,
      'expected a name or an object with a "type" name'
    );
  }
  return {
    name: label,
    total: typeof total === 'number' ? total : null,
    free: typeof free === 'number' ? free : null
  };
}

export class KubelabApi {
  /**
   * @param baseUrl the API root ending in `kubelab/api/`
   * @param request performs requests (JupyterLab's `ServerConnection.makeRequest` in the app)
   */
  constructor(
    readonly baseUrl: string,
    private readonly request: RequestFunction
  ) {
    if (!baseUrl.endsWith('/')) {
      this.baseUrl = `${baseUrl}/`;
    }
  }

  /** Experiments matching `query` (the server's query language), in `sort` order. */
  async listExperiments(
    query = '',
    sort = '',
    signal?: AbortSignal
  ): Promise<IExperimentRecord[]> {
    const params = new URLSearchParams();
    if (query) {
      params.set('query', query);
    }
    if (sort) {
      params.set('sort', sort);
    }
    const suffix = params.toString() ? `?${params}` : '';
    return parseList(
      await this.json('GET', `experiments${suffix}`, undefined, signal)
    );
  }

  async submit(spec: IExperimentSpec): Promise<IExperimentRecord> {
    return parseRecord(await this.json('POST', 'experiments', spec));
  }

  async stop(id: string): Promise<IExperimentRecord> {
    return parseRecord(
      await this.json('POST', `experiments/${encodeURIComponent(id)}/stop`)
    );
  }

  async remove(id: string): Promise<void> {
    await this.send('DELETE', `experiments/${encodeURIComponent(id)}`);
  }

  async resources(): Promise<IResources> {
    return parseResources(await this.json('GET', 'resources'));
  }

  /** An `EventStream` on `kubelab/api/events`; the caller starts and stops it. */
  events(options: Omit<IEventStreamOptions, 'open'>): EventStream {
    return new EventStream({
      ...options,
      open: signal =>
        this.request(this.url('events'), {
          method: 'GET',
          headers: { Accept: 'text/event-stream' },
          cache: 'no-store',
          signal
        })
    });
  }

  private url(path: string): string {
    return this.baseUrl + path;
  }

  private async send(
    method: string,
    path: string,
    body?: unknown,
    signal?: AbortSignal
  ): Promise<Response> {
    const init: RequestInit = { method, signal };
    if (body !== undefined) {
      init.body = JSON.stringify(body);
      init.headers = { 'Content-Type': 'application/json' };
    }
    const response = await this.request(this.url(path), init);
    if (!response.ok) {
      throw await KubelabApiError.fromResponse(response);
    }
    return response;
  }

  private async json(
    method: string,
    path: string,
    body?: unknown,
    signal?: AbortSignal
  ): Promise<unknown> {
    const response = await this.send(method, path, body, signal);
    const text = await response.text();
    try {
      return JSON.parse(text);
    } catch {
      throw new RecordFormatError(
        `${method} ${path}`,
        'the server did not answer with JSON'
      );
    }
  }
}

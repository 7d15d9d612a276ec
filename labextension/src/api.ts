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
import type { IPipelineRecord } from './pipelinegraph';
import type { IRunDiff } from './rundiff';
import type { IScheduleRecord } from './schedules';
import { IServiceRecord, parseService, proxyPath } from './services';
import { IPreemptionPreview, parsePreview } from './preview';
import { ITimelineSpan, parseTimeline } from './runtimeline';
import {
  ISweepDetail,
  ISweepRecord,
  parseSweep,
  parseSweepDetail
} from './sweeps';
import { ISystemRead, IUsage, parseSystem, parseUsage } from './system';

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

/** A run waiting for GPUs in the machine's ledger (local backend). */
export interface IQueueEntry {
  run: string;
  gpus: number;
  gpu_type: string | null;
  since: number | null;
}

/** GPU and backend summary from `GET kubelab/api/resources`. */
export interface IResources {
  backend: string;
  gpus: {
    total: number;
    free: number;
    types: IGpuType[];
    queue: IQueueEntry[];
  };
}

/** One status change: `GET experiments/<id>` → `history`. */
export interface IHistoryEntry {
  state: string;
  reason: string;
  at?: string;
  time?: string;
  exit_code?: number | null;
  [key: string]: unknown;
}

/** A file under the run's `outputs/`. */
export interface IOutputFile {
  path: string;
  size: number;
}

/** `GET experiments/<id>`: the record plus what the experiment view shows. */
export interface IExperimentDetail extends IExperimentRecord {
  spec: Record<string, unknown>;
  history: IHistoryEntry[];
  replica_status: unknown;
  run_dir: string;
  run_dir_relative: string | null;
  outputs: IOutputFile[];
  events?: Record<string, unknown>[];
  /** The history folded into spans (sizes, preemptions, resumes), oldest first. */
  timeline: ITimelineSpan[];
}

/** One line of `metrics.jsonl`: `{step, metrics, time}` (and `final` for report_final). */
export interface IMetricPoint {
  step: number | null;
  metrics: Record<string, number>;
  time?: number | string;
  final?: boolean;
}

/** One trial's reported points (`GET sweeps/<id>/metrics`); `result` is `pruned` for early-stopped trials. */
export interface ITrialPoints {
  trial: number;
  id: string | null;
  result: string;
  points: IMetricPoint[];
}

/** A TensorBoard session (`GET tensorboards`, `event: tensorboard`). */
export interface ITensorBoardSession {
  id: string;
  url: string;
  logdirs: Record<string, string>;
  state: string;
  reason?: string;
  source?: unknown;
  started_at?: string | number | null;
}

/** Session states in which the tab has nothing left to show. */
/** A replica's index, or `build`: the log of the run's init steps and environment build. */
export type LogReplica = number | 'build';

export const ENDED_STATES: ReadonlySet<string> = new Set(['stopped', 'failed']);

/**
 * Whether the session `id` has ended, judged from the store's list: a session the
 * list does not know (yet) has not ended; the tab opens before the event arrives.
 */
export function sessionEnded(
  sessions: readonly ITensorBoardSession[],
  id: string
): boolean {
  const session = sessions.find(s => s.id === id);
  return session !== undefined && ENDED_STATES.has(session.state);
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

function cwdQuery(cwd: string): string {
  return cwd ? `?cwd=${encodeURIComponent(cwd)}` : '';
}

/** `a/b/c.yaml` → `{dir: 'a/b', name: 'c.yaml'}`. */
export function splitPath(path: string): { dir: string; name: string } {
  const clean = path.replace(/^\/+/, '');
  const slash = clean.lastIndexOf('/');
  return slash < 0
    ? { dir: '', name: clean }
    : { dir: clean.slice(0, slash), name: clean.slice(slash + 1) };
}

/** Check a TensorBoard session record. */
export function parseTensorBoard(value: unknown): ITensorBoardSession {
  const body = value as Record<string, unknown> | null;
  for (const key of ['id', 'url', 'state']) {
    if (typeof body?.[key] !== 'string') {
      throw new RecordFormatError(`tensorboard.${key}`, 'expected a string');
    }
  }
  return {
    ...(body as unknown as ITensorBoardSession),
    logdirs: (body?.logdirs as Record<string, string>) ?? {}
  };
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
  const queue = Array.isArray(gpus.queue) ? gpus.queue : [];
  return {
    backend: body.backend,
    gpus: {
      total: gpus.total,
      free: typeof gpus.free === 'number' ? gpus.free : gpus.total,
      types: types.map((entry, index) => parseGpuType(entry, index)),
      queue: queue
        .filter(entry => typeof entry?.run === 'string')
        .map(entry => ({
          run: entry.run,
          gpus: typeof entry.gpus === 'number' ? entry.gpus : 0,
          gpu_type: typeof entry.gpu_type === 'string' ? entry.gpu_type : null,
          since: typeof entry.since === 'number' ? entry.since : null
        }))
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

/** A server error as the user should read it: the detail and each field's reason. */
export function describeError(reason: unknown): string {
  if (reason instanceof KubelabApiError) {
    const fields = reason.fields.map(f => `${f.path}: ${f.reason}`);
    return [reason.detail || reason.error, ...fields].join('\n');
  }
  return reason instanceof Error ? reason.message : String(reason);
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

  /** Submit a spec; `cwd` (relative to the server's root) is where its paths start. */
  async submit(
    spec: IExperimentSpec | Record<string, unknown>,
    cwd = ''
  ): Promise<IExperimentRecord> {
    return parseRecord(
      await this.json('POST', `experiments${cwdQuery(cwd)}`, spec)
    );
  }

  /** Run the spec file at `path` (relative to the server's root; YAML, JSON, polyaxonfile). */
  async submitFile(path: string): Promise<IExperimentRecord> {
    const { dir, name } = splitPath(path);
    return parseRecord(
      await this.json('POST', `experiments${cwdQuery(dir)}`, { file: name })
    );
  }

  async experiment(id: string): Promise<IExperimentDetail> {
    const body = await this.json(
      'GET',
      `experiments/${encodeURIComponent(id)}`
    );
    const record = parseRecord(body, 'experiment');
    const detail = body as Record<string, unknown>;
    return {
      ...record,
      spec: (detail.spec as Record<string, unknown>) ?? {},
      history: Array.isArray(detail.history) ? detail.history : [],
      replica_status: detail.replica_status ?? null,
      run_dir: String(detail.run_dir ?? ''),
      run_dir_relative:
        typeof detail.run_dir_relative === 'string'
          ? detail.run_dir_relative
          : null,
      outputs: Array.isArray(detail.outputs) ? detail.outputs : [],
      events: Array.isArray(detail.events) ? detail.events : undefined,
      timeline: parseTimeline(detail.timeline)
    };
  }

  async metrics(id: string): Promise<IMetricPoint[]> {
    const body = (await this.json(
      'GET',
      `experiments/${encodeURIComponent(id)}/metrics`
    )) as { points?: unknown };
    if (!Array.isArray(body?.points)) {
      throw new RecordFormatError('metrics.points', 'expected a list');
    }
    return body.points as IMetricPoint[];
  }

  /** The user's own runs created in the last `since` (7d, 12h, …), summed. */
  async usage(since = '7d'): Promise<IUsage> {
    return parseUsage(
      await this.json('GET', `usage?since=${encodeURIComponent(since)}`)
    );
  }

  /** The run's use of the machine: its sums and, in at most `points` buckets, its series. */
  async system(id: string, points = 500): Promise<ISystemRead> {
    return parseSystem(
      await this.json(
        'GET',
        `experiments/${encodeURIComponent(id)}/system?points=${points}`
      )
    );
  }

  /**
   * A replica's log, or `build`: the run's init steps and environment build; with `follow`,
   * text keeps arriving until the run ends or `signal` aborts. Each decoded chunk goes to
   * `onText`. With `timestamps`, each line starts with its time (ISO 8601 UTC) and a space.
   */
  async logs(
    id: string,
    replica: LogReplica,
    follow: boolean,
    onText: (text: string) => void,
    signal?: AbortSignal,
    timestamps = false
  ): Promise<void> {
    const path = `experiments/${encodeURIComponent(id)}/logs?replica=${replica}${follow ? '&follow=1' : ''}${timestamps ? '&timestamps=1' : ''}`;
    const response = await this.send('GET', path, undefined, signal);
    if (!response.body) {
      onText(await response.text());
      return;
    }
    const reader = response.body.getReader();
    const decoder = new TextDecoder();
    for (;;) {
      const { done, value } = await reader.read();
      if (done) {
        break;
      }
      onText(decoder.decode(value, { stream: true }));
    }
  }

  /** The text of an output file (e.g. the executed notebook) served by the API. */
  async outputText(id: string, path: string): Promise<string> {
    const encoded = path.split('/').map(encodeURIComponent).join('/');
    const response = await this.send(
      'GET',
      `experiments/${encodeURIComponent(id)}/outputs/${encoded}`
    );
    return response.text();
  }

  async sweeps(signal?: AbortSignal): Promise<ISweepRecord[]> {
    const body = (await this.json('GET', 'sweeps', undefined, signal)) as {
      items?: unknown;
    };
    if (!Array.isArray(body?.items)) {
      throw new RecordFormatError(
        'response.items',
        'expected a list of sweeps'
      );
    }
    return body.items.map((item, index) =>
      parseSweep(item, `response.items[${index}]`)
    );
  }

  async sweep(id: string): Promise<ISweepDetail> {
    return parseSweepDetail(
      await this.json('GET', `sweeps/${encodeURIComponent(id)}`)
    );
  }

  async createSweep(body: unknown, cwd = ''): Promise<ISweepRecord> {
    return parseSweep(await this.json('POST', `sweeps${cwdQuery(cwd)}`, body));
  }

  /** Every trial's points and the sweep's verdict on it, for the overlaid curves. */
  async sweepMetrics(id: string): Promise<ITrialPoints[]> {
    const body = (await this.json(
      'GET',
      `sweeps/${encodeURIComponent(id)}/metrics`
    )) as { trials?: unknown };
    if (!Array.isArray(body?.trials)) {
      throw new RecordFormatError(
        'response.trials',
        'expected a list of trials'
      );
    }
    return body.trials as ITrialPoints[];
  }

  async stopSweep(id: string): Promise<ISweepRecord> {
    return parseSweep(
      await this.json('POST', `sweeps/${encodeURIComponent(id)}/stop`)
    );
  }

  /** Resume a stopped sweep; `budget` may raise `max_trials` or `max_duration`. */
  async resumeSweep(
    id: string,
    budget: Record<string, unknown> = {}
  ): Promise<ISweepRecord> {
    return parseSweep(
      await this.json('POST', `sweeps/${encodeURIComponent(id)}/resume`, budget)
    );
  }

  async tensorboards(signal?: AbortSignal): Promise<ITensorBoardSession[]> {
    const body = (await this.json(
      'GET',
      'tensorboards',
      undefined,
      signal
    )) as {
      items?: unknown;
    };
    if (!Array.isArray(body?.items)) {
      throw new RecordFormatError(
        'response.items',
        'expected a list of TensorBoard sessions'
      );
    }
    return body.items.map(parseTensorBoard);
  }

  /** Start (or reuse) a session: `{experiments: [...]}`, `{sweep}`, `{query}`, `{project: true}`. */
  async startTensorBoard(
    source: Record<string, unknown>
  ): Promise<ITensorBoardSession> {
    return parseTensorBoard(await this.json('POST', 'tensorboards', source));
  }

  async stopTensorBoard(id: string): Promise<ITensorBoardSession> {
    return parseTensorBoard(
      await this.json('DELETE', `tensorboards/${encodeURIComponent(id)}`)
    );
  }

  /** Start a Stopped run again, the same run, from its latest checkpoint. */
  async resume(id: string): Promise<IExperimentRecord> {
    return parseRecord(
      await this.json('POST', `experiments/${encodeURIComponent(id)}/resume`)
    );
  }

  async stop(id: string): Promise<IExperimentRecord> {
    return parseRecord(
      await this.json('POST', `experiments/${encodeURIComponent(id)}/stop`)
    );
  }

  async remove(id: string): Promise<void> {
    await this.send('DELETE', `experiments/${encodeURIComponent(id)}`);
  }

  async services(signal?: AbortSignal): Promise<IServiceRecord[]> {
    const body = (await this.json('GET', 'services', undefined, signal)) as {
      items?: unknown;
    };
    if (!Array.isArray(body?.items)) {
      throw new RecordFormatError(
        'response.items',
        'expected a list of services'
      );
    }
    return body.items.map(parseService);
  }

  /** Start a service from a `kind: service` spec (a model, a predictor or a command). */
  async startService(spec: Record<string, unknown>): Promise<IServiceRecord> {
    return parseService(await this.json('POST', 'services', spec));
  }

  async stopService(id: string): Promise<IServiceRecord> {
    return parseService(
      await this.json('POST', `services/${encodeURIComponent(id)}/stop`)
    );
  }

  /**
   * Move or copy traffic between a service's versions on a cluster: `traffic` maps versions
   * to percents (the one left out takes the rest), as `kubelab service traffic` does; the
   * answer is every version's view.
   */
  async setTraffic(
    name: string,
    traffic: Record<string, unknown>,
    mirror: Record<string, unknown> = {}
  ): Promise<IServiceRecord[]> {
    const body = (await this.json(
      'POST',
      `services/${encodeURIComponent(name)}/traffic`,
      { traffic, mirror }
    )) as { items?: unknown };
    if (!Array.isArray(body?.items)) {
      throw new RecordFormatError(
        'response.items',
        'expected a list of services'
      );
    }
    return body.items.map(parseService);
  }

  async deleteService(id: string): Promise<void> {
    await this.send('DELETE', `services/${encodeURIComponent(id)}`);
  }

  /** A request to the service itself, through the server's proxy (`kubelab/services/<id>/…`). */
  toService(
    service: IServiceRecord,
    path: string,
    init: RequestInit
  ): Promise<Response> {
    const root = this.baseUrl.replace(/kubelab\/api\/$/, '');
    return this.request(root + proxyPath(service, path), init);
  }

  async pipelines(signal?: AbortSignal): Promise<IPipelineRecord[]> {
    const body = await this.json('GET', 'pipelines', undefined, signal);
    return (body as { items: IPipelineRecord[] }).items;
  }

  async pipeline(id: string, signal?: AbortSignal): Promise<IPipelineRecord> {
    const path = `pipelines/${encodeURIComponent(id)}`;
    return (await this.json('GET', path, undefined, signal)) as IPipelineRecord;
  }

  async pipelineAction(
    id: string,
    action: 'stop' | 'resume'
  ): Promise<IPipelineRecord> {
    const path = `pipelines/${encodeURIComponent(id)}/${action}`;
    return (await this.json('POST', path)) as IPipelineRecord;
  }

  async schedules(signal?: AbortSignal): Promise<IScheduleRecord[]> {
    const body = await this.json('GET', 'schedules', undefined, signal);
    return (body as { items: IScheduleRecord[] }).items;
  }

  async scheduleAction(
    id: string,
    action: 'pause' | 'resume'
  ): Promise<IScheduleRecord> {
    const path = `schedules/${encodeURIComponent(id)}/${action}`;
    return (await this.json('POST', path)) as IScheduleRecord;
  }

  async deleteSchedule(id: string): Promise<void> {
    await this.send('DELETE', `schedules/${encodeURIComponent(id)}`);
  }

  /** What differs between runs `a` and `b`: spec, parameters, code, environment. */
  async diff(a: string, b: string): Promise<IRunDiff> {
    const query = `diff?a=${encodeURIComponent(a)}&b=${encodeURIComponent(b)}`;
    return (await this.json('GET', query)) as IRunDiff;
  }

  async resources(): Promise<IResources> {
    return parseResources(await this.json('GET', 'resources'));
  }

  /** Which running runs a new run of `gpus` GPUs at `priority` would preempt or shrink. */
  async preview(gpus: string, priority: string): Promise<IPreemptionPreview> {
    const query = new URLSearchParams({ gpus, priority });
    return parsePreview(
      await this.json('GET', `resources/preview?${query.toString()}`)
    );
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

/**
 * The live state every kubelab view shares: one event stream, the experiments table,
 * sweeps, TensorBoard sessions, services and resources. Views subscribe to `changed` (and to
 * `metrics`/`experimentChanged` for one run) and never poll. The one thing the stream does not
 * carry is the services' traffic figures (the proxy's, changing with every request): the store
 * reads the services' list again every `SERVICE_STATS_MS` while one of them runs.
 */
import { ISignal, Signal } from '@lumino/signaling';

import {
  IMetricPoint,
  IResources,
  ITensorBoardSession,
  KubelabApi,
  parseTensorBoard
} from './api';
import { IServerSentEvent, StreamState } from './events';
import {
  applyEvent,
  EMPTY_TABLE,
  ExperimentEvent,
  IExperimentRecord,
  IExperimentTable,
  ISortOrder,
  loadTable,
  needsRefetch,
  parseEvent,
  sortTable
} from './model';
import { IQueryError, queryError } from './query';
import {
  applyService,
  IServiceRecord,
  parseService,
  removeService,
  SERVICE_ENDED
} from './services';
import { applySweep, ISweepRecord, parseSweep } from './sweeps';

export interface IMetricsEvent {
  id: string;
  points: IMetricPoint[];
}

const REFETCH_DELAY_MS = 300;
export const SERVICE_STATS_MS = 10_000;

export class LiveStore {
  table: IExperimentTable = EMPTY_TABLE;
  sweeps: ISweepRecord[] = [];
  tensorboards: ITensorBoardSession[] = [];
  services: IServiceRecord[] = [];
  resources: IResources | null = null;
  stream: StreamState = { kind: 'connecting' };
  query = '';
  queryError: IQueryError | null = null;
  /** How often the services' list is read again for their traffic figures, while one runs. */
  serviceStatsMs = SERVICE_STATS_MS;

  private readonly _changed = new Signal<this, void>(this);
  private readonly _metrics = new Signal<this, IMetricsEvent>(this);
  private readonly _experiment = new Signal<this, IExperimentRecord>(this);
  private readonly _sweep = new Signal<this, ISweepRecord>(this);
  private stream_: ReturnType<KubelabApi['events']> | null = null;
  private refetchTimer: ReturnType<typeof setTimeout> | null = null;
  private resourcesTimer: ReturnType<typeof setTimeout> | null = null;
  private statsTimer: ReturnType<typeof setTimeout> | null = null;
  private listGeneration = 0;
  private inFlight: ExperimentEvent[] | null = null;
  private listAbort: AbortController | null = null;
  private markLoaded: () => void = () => undefined;
  /** Resolves once the lists were read the first time (a restored view may wait for it). */
  readonly ready = new Promise<void>(resolve => (this.markLoaded = resolve));

  constructor(readonly api: KubelabApi) {}

  get changed(): ISignal<this, void> {
    return this._changed;
  }
  get metrics(): ISignal<this, IMetricsEvent> {
    return this._metrics;
  }
  get experimentChanged(): ISignal<this, IExperimentRecord> {
    return this._experiment;
  }
  get sweepChanged(): ISignal<this, ISweepRecord> {
    return this._sweep;
  }

  start(): void {
    if (this.stream_) {
      return;
    }
    this.stream_ = this.api.events({
      onConnect: signal => this.reload(signal),
      onEvent: event => this.onEvent(event),
      onStateChange: state => {
        this.stream = state;
        this.emit();
      }
    });
    this.stream_.start();
  }

  async dispose(): Promise<void> {
    this.clearTimers();
    await this.stream_?.stop();
    this.stream_ = null;
    Signal.clearData(this);
  }

  /** Filter with PQL; a refused query keeps the last good table and shows the error. */
  async setQuery(query: string): Promise<void> {
    if (query === this.query && !this.queryError) {
      return; // Enter on the same text: the table already is that query's
    }
    this.query = query;
    await this.refetchExperiments();
  }

  setSort(sort: ISortOrder): void {
    const next = sortTable(this.table, sort);
    if (next !== this.table) {
      this.table = next;
      this.emit();
    }
  }

  experiment(id: string): IExperimentRecord | undefined {
    return this.table.rows.find(row => row.id === id);
  }

  service(id: string): IServiceRecord | undefined {
    return this.services.find(service => service.id === id);
  }

  /** A service as an action's answer has it (its event may come later), or gone. */
  noteService(record: IServiceRecord | { id: string; deleted: true }): void {
    this.services =
      'deleted' in record
        ? removeService(this.services, record.id)
        : applyService(this.services, record);
    this.scheduleServiceStats();
    this.emit();
  }

  /** Read the lists again now (the Refresh command), as a reconnect would. */
  async refresh(): Promise<void> {
    await this.reload(new AbortController().signal);
  }

  /** Re-read GPUs now (after a submit, say); the stream will also trigger it. */
  refreshResources(): void {
    this.scheduleResources(0);
  }

  private async reload(signal: AbortSignal): Promise<void> {
    const generation = ++this.listGeneration;
    const [records, sweeps, tensorboards, services] = await Promise.all([
      this.listExperiments(signal),
      this.api.sweeps(signal).catch(reason => {
        console.warn('kubelab: could not load sweeps', reason);
        return this.sweeps;
      }),
      this.api.tensorboards(signal).catch(reason => {
        console.warn('kubelab: could not load TensorBoard sessions', reason);
        return this.tensorboards;
      }),
      this.api.services(signal).catch(reason => {
        console.warn('kubelab: could not load services', reason);
        return this.services;
      })
    ]);
    if (signal.aborted || generation !== this.listGeneration) {
      return;
    }
    this.inFlight = null; // a (re)connection's list supersedes a refetch in flight
    if (records) {
      this.table = loadTable(records, this.table.sort);
    }
    const before = new Map(this.sweeps.map(sweep => [sweep.id, sweep]));
    this.sweeps = sweeps;
    this.tensorboards = tensorboards;
    this.services = services;
    this.scheduleResources(0);
    this.scheduleServiceStats();
    this.markLoaded();
    this.emit();
    // A (re)connection's list may hold what the stream missed while it was down: the views
    // that follow one sweep hear of every sweep that changed meanwhile, as from its event.
    for (const sweep of sweeps) {
      const old = before.get(sweep.id);
      if (!old || JSON.stringify(old) !== JSON.stringify(sweep)) {
        this._sweep.emit(sweep);
      }
    }
  }

  /** The list for the current query; null (and `queryError` set) when PQL was refused. */
  private async listExperiments(
    signal?: AbortSignal
  ): Promise<IExperimentRecord[] | null> {
    const query = this.query;
    try {
      const records = await this.api.listExperiments(query, '', signal);
      if (query === this.query) {
        this.queryError = null;
      }
      return records;
    } catch (error) {
      const problem = queryError(error);
      if (!problem) {
        throw error;
      }
      if (query === this.query) {
        this.queryError = problem;
        this.emit();
      }
      return null;
    }
  }

  private async refetchExperiments(): Promise<void> {
    const generation = ++this.listGeneration;
    // A newer query makes the list in flight moot: stop reading (and parsing) it.
    this.listAbort?.abort();
    const abort = (this.listAbort = new AbortController());
    // Events that arrive while the list is in flight may postdate it: they are merged
    // into the new list (through the query, as any event is), not lost under it.
    const missed: ExperimentEvent[] = [];
    this.inFlight = missed;
    try {
      const records = await this.listExperiments(abort.signal);
      if (generation !== this.listGeneration) {
        return;
      }
      this.inFlight = null;
      if (records) {
        this.table = loadTable(records, this.table.sort);
        missed.forEach(event => this.mergeEvent(event));
      }
      this.emit();
    } catch (reason) {
      if (generation !== this.listGeneration) {
        return; // aborted for a newer list
      }
      this.inFlight = null;
      console.warn('kubelab: could not load experiments', reason);
    }
  }

  private onEvent(message: IServerSentEvent): void {
    try {
      switch (message.event) {
        case 'experiment':
        case 'deleted':
          this.onExperimentEvent(parseEvent(message.event, message.data));
          return;
        case 'metrics': {
          const data = JSON.parse(message.data) as IMetricsEvent;
          if (typeof data?.id === 'string' && Array.isArray(data.points)) {
            this._metrics.emit(data);
          }
          return;
        }
        case 'sweep': {
          const record = parseSweep(JSON.parse(message.data), 'sweep');
          this.sweeps = applySweep(this.sweeps, record);
          this._sweep.emit(record);
          this.emit();
          return;
        }
        case 'service':
          this.services = applyService(
            this.services,
            parseService(JSON.parse(message.data))
          );
          this.scheduleServiceStats();
          this.emit();
          return;
        case 'service_deleted':
          this.services = removeService(
            this.services,
            String(JSON.parse(message.data)?.id)
          );
          this.emit();
          return;
        case 'tensorboard': {
          const session = parseTensorBoard(JSON.parse(message.data));
          this.tensorboards = [
            ...this.tensorboards.filter(s => s.id !== session.id),
            session
          ];
          this.emit();
          return;
        }
      }
    } catch (reason) {
      console.warn('kubelab: ignoring a malformed event', reason);
    }
  }

  private onExperimentEvent(event: ExperimentEvent | null): void {
    if (!event) {
      return;
    }
    const before = this.table;
    this.inFlight?.push(event);
    this.mergeEvent(event);
    if (event.kind === 'experiment') {
      const previous = before.rows.find(row => row.id === event.record.id);
      if (!previous || previous.status !== event.record.status) {
        this.scheduleResources(200); // GPUs change hands when runs start and end
      }
      this._experiment.emit(event.record);
    } else {
      this.scheduleResources(200);
    }
    if (this.table !== before) {
      this.emit();
    }
  }

  /**
   * Merge one event into the table through the current query: unfiltered, it is
   * applied; filtered, only a row already shown is updated in place, and a new run (or
   * a changed status) asks the server, which alone evaluates PQL, for the list again.
   */
  private mergeEvent(event: ExperimentEvent): void {
    const filtered = this.query !== '';
    if (needsRefetch(this.table, event, filtered)) {
      this.scheduleRefetch();
    }
    const shown =
      event.kind === 'experiment' &&
      this.table.rows.some(row => row.id === event.record.id);
    if (!filtered || event.kind === 'deleted' || shown) {
      this.table = applyEvent(this.table, event);
    }
  }

  private scheduleRefetch(): void {
    // While a list is in flight its missed events are replayed on it when it lands,
    // which asks again if some new run is still missing: one request at a time.
    if (this.refetchTimer === null && this.inFlight === null) {
      this.refetchTimer = setTimeout(() => {
        this.refetchTimer = null;
        void this.refetchExperiments();
      }, REFETCH_DELAY_MS);
    }
  }

  private scheduleResources(delayMs: number): void {
    if (this.resourcesTimer !== null) {
      return;
    }
    this.resourcesTimer = setTimeout(() => {
      this.resourcesTimer = null;
      this.api.resources().then(
        resources => {
          this.resources = resources;
          this.emit();
        },
        reason => console.warn('kubelab: could not load resources', reason)
      );
    }, delayMs);
  }

  /** The services' list again in a while, for their traffic figures, while one runs. */
  private scheduleServiceStats(): void {
    const running = this.services.some(s => !SERVICE_ENDED.has(s.state));
    if (this.statsTimer !== null || !running || this.stream_ === null) {
      return;
    }
    this.statsTimer = setTimeout(() => {
      this.statsTimer = null;
      this.api.services().then(
        services => {
          this.services = services;
          this.emit();
          this.scheduleServiceStats();
        },
        reason => {
          console.warn('kubelab: could not load services', reason);
          this.scheduleServiceStats();
        }
      );
    }, this.serviceStatsMs);
  }

  private clearTimers(): void {
    for (const timer of [
      this.refetchTimer,
      this.resourcesTimer,
      this.statsTimer
    ]) {
      if (timer !== null) {
        clearTimeout(timer);
      }
    }
    this.refetchTimer = this.resourcesTimer = this.statsTimer = null;
  }

  private emit(): void {
    this._changed.emit();
  }
}

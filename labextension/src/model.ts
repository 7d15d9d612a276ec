/**
 * The experiments table as plain data, and the pure functions that change it.
 *
 * The sidebar loads the list once per (re)connection and then applies event-stream
 * messages to it. Keeping that logic free of DOM, React and JupyterLab imports lets
 * jest test it directly and keeps the view a thin renderer of `IExperimentTable`.
 */

import { STATES, TERMINAL_STATES as TERMINAL } from './vocabulary';

/** The lifecycle states a backend reports (declared in `kubelab/records.py`). */
export { STATES };

export type ExperimentState = (typeof STATES)[number];

/** States after which a run never changes again. */
export const TERMINAL_STATES: ReadonlySet<ExperimentState> = new Set(TERMINAL);

/** One experiment as the server sends it (`GET kubelab/api/experiments`, `event: experiment`). */
export interface IExperimentRecord {
  id: string;
  name: string;
  status: ExperimentState;
  reason: string;
  exit_code: number | null;
  created_at: string;
  started_at: string | null;
  finished_at: string | null;
  duration: number | null;
  params: Record<string, unknown>;
  tags: string[];
  sweep: string | null;
  trial: number | null;
  pipeline: string | null;
  pipeline_step: string | null;
  metrics: Record<string, number>;
  step: number | null;
  resources: Record<string, unknown>;
  replicas: number;
  framework: string;
  backend: string;
}

/** A message from the event stream, already checked. */
export type ExperimentEvent =
  | { kind: 'experiment'; record: IExperimentRecord }
  | { kind: 'deleted'; id: string };

/** The columns a table can sort by (and show; see the settings schema). */
export const COLUMNS = [
  'name',
  'status',
  'started',
  'duration',
  'gpus',
  'params',
  'metric'
] as const;

export type Column = (typeof COLUMNS)[number];
export type SortColumn = Column | 'created';

export interface ISortOrder {
  column: SortColumn;
  descending: boolean;
}

export const DEFAULT_SORT: ISortOrder = { column: 'created', descending: true };

/** The table the sidebar renders: rows in `sort` order. */
export interface IExperimentTable {
  readonly rows: readonly IExperimentRecord[];
  readonly sort: ISortOrder;
}

/** Raised when the server sends something that does not match the contract. */
export class RecordFormatError extends Error {
  constructor(
    readonly path: string,
    readonly reason: string
  ) {
    super(`${path}: ${reason}`);
    this.name = 'RecordFormatError';
  }
}

export const EMPTY_TABLE: IExperimentTable = { rows: [], sort: DEFAULT_SORT };

/** Replace the whole table with a freshly fetched list (a (re)connect starts here). */
export function loadTable(
  records: readonly IExperimentRecord[],
  sort: ISortOrder = DEFAULT_SORT
): IExperimentTable {
  const byId = new Map<string, IExperimentRecord>();
  for (const record of records) {
    byId.set(record.id, record);
  }
  return { rows: [...byId.values()].sort(comparator(sort)), sort };
}

/** The same rows in another order; the same table when the order is unchanged. */
export function sortTable(
  table: IExperimentTable,
  sort: ISortOrder
): IExperimentTable {
  if (
    sort.column === table.sort.column &&
    sort.descending === table.sort.descending
  ) {
    return table;
  }
  return { rows: table.rows.slice().sort(comparator(sort)), sort };
}

/** Clicking a header: the same column flips direction, a new one starts descending. */
export function toggleSort(
  current: ISortOrder,
  column: SortColumn
): ISortOrder {
  if (current.column === column) {
    return { column, descending: !current.descending };
  }
  return { column, descending: column !== 'name' };
}

/**
 * Apply one event: insert a new record, update an existing one (by id), or delete
 * one. A changed row moves by binary search, so a 10,000-row table costs a few dozen
 * comparisons per event, not a re-sort. Returns the same table object when nothing
 * changed so a view can skip re-rendering.
 */
export function applyEvent(
  table: IExperimentTable,
  event: ExperimentEvent
): IExperimentTable {
  if (event.kind === 'deleted') {
    const index = table.rows.findIndex(row => row.id === event.id);
    if (index < 0) {
      return table;
    }
    const rows = table.rows.slice();
    rows.splice(index, 1);
    return { rows, sort: table.sort };
  }
  const record = event.record;
  const compare = comparator(table.sort);
  const rows = table.rows.slice();
  const index = rows.findIndex(row => row.id === record.id);
  if (index >= 0) {
    const before = index > 0 ? rows[index - 1] : null;
    const after = index + 1 < rows.length ? rows[index + 1] : null;
    const stays =
      (!before || compare(before, record) <= 0) &&
      (!after || compare(record, after) <= 0);
    if (stays) {
      rows[index] = record;
      return { rows, sort: table.sort };
    }
    rows.splice(index, 1);
  }
  rows.splice(insertionPoint(rows, record, compare), 0, record);
  return { rows, sort: table.sort };
}

function insertionPoint(
  rows: readonly IExperimentRecord[],
  record: IExperimentRecord,
  compare: (a: IExperimentRecord, b: IExperimentRecord) => number
): number {
  let low = 0;
  let high = rows.length;
  while (low < high) {
    const middle = (low + high) >>> 1;
    if (compare(rows[middle], record) <= 0) {
      low = middle + 1;
    } else {
      high = middle;
    }
  }
  return low;
}

/** Apply events in arrival order (e.g. the ones buffered while the list was loading). */
export function applyEvents(
  table: IExperimentTable,
  events: readonly ExperimentEvent[]
): IExperimentTable {
  return events.reduce(applyEvent, table);
}

/**
 * While a PQL filter is active the table holds only the server's matches, and only the
 * server can evaluate PQL. An event for a row already shown updates it in place; a new
 * run, or a row whose status changed (it may have stopped matching), asks for one
 * refetch of the filtered list instead (debounced by the caller).
 */
export function needsRefetch(
  table: IExperimentTable,
  event: ExperimentEvent,
  filtered: boolean
): boolean {
  if (!filtered || event.kind === 'deleted') {
    return false;
  }
  const shown = table.rows.find(row => row.id === event.record.id);
  return !shown || shown.status !== event.record.status;
}

const STATUS_ORDER = new Map<string, number>(STATES.map((s, i) => [s, i]));

/** The value a column sorts by; null sorts last in either direction. */
export function sortValue(
  record: IExperimentRecord,
  column: SortColumn
): number | string | null {
  switch (column) {
    case 'created':
      return timestamp(record.created_at);
    case 'name':
      return record.name.toLowerCase();
    case 'status':
      return STATUS_ORDER.get(record.status) ?? null;
    case 'started':
      return record.started_at ? timestamp(record.started_at) : null;
    case 'duration':
      if (record.duration !== null && record.duration !== undefined) {
        return record.duration;
      }
      // Still running: longer than any finished run, the earliest start the longest.
      return record.started_at
        ? 1e13 - timestamp(record.started_at) / 1000
        : null;
    case 'gpus':
      return gpuCount(record);
    case 'params':
      return formatParams(record.params) || null;
    case 'metric': {
      const entry = primaryMetric(record);
      return entry && typeof entry[1] === 'number' ? entry[1] : null;
    }
  }
}

const collator = new Intl.Collator(undefined, {
  numeric: true,
  sensitivity: 'base'
});

/** Names as people read them: `run-2` < `run-10` < `run-999` < `run-2000`. */
export function naturalCompare(a: string, b: string): number {
  return collator.compare(a, b);
}

/** Ascending or descending by a column, nulls last, newest first among equals. */
export function comparator(
  sort: ISortOrder
): (a: IExperimentRecord, b: IExperimentRecord) => number {
  if (sort.column === 'created') {
    return sort.descending ? newestFirst : (a, b) => newestFirst(b, a);
  }
  const sign = sort.descending ? -1 : 1;
  return (a, b) => {
    const x = sortValue(a, sort.column);
    const y = sortValue(b, sort.column);
    if (x === null || y === null) {
      if (x === y) {
        return newestFirst(a, b);
      }
      return x === null ? 1 : -1;
    }
    const order =
      typeof x === 'string' && typeof y === 'string'
        ? naturalCompare(x, y)
        : x < y
          ? -1
          : x > y
            ? 1
            : 0;
    return order === 0 ? newestFirst(a, b) : sign * order;
  };
}

export function gpuCount(record: IExperimentRecord): number {
  const gpus = Number(record.resources?.gpus ?? 0);
  return Number.isFinite(gpus) ? gpus * (record.replicas || 1) : 0;
}

/** `2× T4`, `1`, or `—` for CPU-only runs. */
export function formatGpus(record: IExperimentRecord): string {
  const count = gpuCount(record);
  if (!count) {
    return '—';
  }
  const type = record.resources?.gpu_type;
  return typeof type === 'string' && type ? `${count}× ${type}` : String(count);
}

/** Key parameters, compact: `lr=0.01 batch=64`. */
export function formatParams(params: Record<string, unknown> | null): string {
  return Object.entries(params ?? {})
    .map(([key, value]) => {
      const shown =
        typeof value === 'number'
          ? formatNumber(value)
          : typeof value === 'string'
            ? value
            : JSON.stringify(value);
      return `${key}=${shown}`;
    })
    .join(' ');
}

/** The metric a row shows: `default` (a final objective) if reported, else the first. */
export function primaryMetric(
  record: IExperimentRecord
): [string, number] | null {
  const metrics = record.metrics ?? {};
  if (typeof metrics.default === 'number') {
    return ['default', metrics.default];
  }
  const entries = Object.entries(metrics);
  return entries.length ? entries[0] : null;
}

/** Newest first by creation time; ids sort by creation time too, so they break ties. */
export function newestFirst(
  a: IExperimentRecord,
  b: IExperimentRecord
): number {
  const byTime = timestamp(b.created_at) - timestamp(a.created_at);
  if (byTime !== 0) {
    return byTime;
  }
  return a.id < b.id ? 1 : a.id > b.id ? -1 : 0;
}

function timestamp(iso: string | null): number {
  const value = iso ? Date.parse(iso) : NaN;
  return Number.isNaN(value) ? 0 : value;
}

/**
 * Turn an event-stream message (its `event:` name and `data:` text) into an event.
 * Returns null for event names this version does not know, so a newer server can add
 * event types without breaking older sidebars; malformed known events throw.
 */
export function parseEvent(name: string, data: string): ExperimentEvent | null {
  if (name !== 'experiment' && name !== 'deleted') {
    return null;
  }
  let payload: unknown;
  try {
    payload = JSON.parse(data);
  } catch {
    throw new RecordFormatError(name, 'data is not valid JSON');
  }
  if (name === 'deleted') {
    const body = asObject(payload, 'deleted');
    return { kind: 'deleted', id: requireString(body, 'id', 'deleted') };
  }
  return { kind: 'experiment', record: parseRecord(payload, 'experiment') };
}

/** Check the fields the sidebar relies on; the rest are passed through untouched. */
export function parseRecord(
  value: unknown,
  path = 'record'
): IExperimentRecord {
  const body = asObject(value, path);
  requireString(body, 'id', path);
  requireString(body, 'name', path);
  requireString(body, 'created_at', path);
  const status = body.status;
  if (!STATES.includes(status as ExperimentState)) {
    throw new RecordFormatError(
      `${path}.status`,
      `expected one of ${STATES.join(', ')}, got ${JSON.stringify(status)}`
    );
  }
  if (body.metrics !== undefined && body.metrics !== null) {
    asObject(body.metrics, `${path}.metrics`);
  }
  return {
    ...(body as unknown as IExperimentRecord),
    metrics: (body.metrics as Record<string, number> | null) ?? {}
  };
}

/** Parse the body of `GET kubelab/api/experiments`. */
export function parseList(value: unknown): IExperimentRecord[] {
  const body = asObject(value, 'response');
  if (!Array.isArray(body.items)) {
    throw new RecordFormatError(
      'response.items',
      'expected a list of experiments'
    );
  }
  return body.items.map((item, index) =>
    parseRecord(item, `response.items[${index}]`)
  );
}

function asObject(value: unknown, path: string): Record<string, unknown> {
  if (typeof value !== 'object' || value === null || Array.isArray(value)) {
    throw new RecordFormatError(path, 'expected a JSON object');
  }
  return value as Record<string, unknown>;
}

function requireString(
  body: Record<string, unknown>,
  key: string,
  path: string
): string {
  const value = body[key];
  if (typeof value !== 'string' || value === '') {
    throw new RecordFormatError(
      `${path}.${key}`,
      'expected a non-empty string'
    );
  }
  return value;
}

/**
 * Seconds the run has been (or was) running at `nowMs`, or null before it starts.
 * Finished runs trust the server's `duration`; running ones tick in the browser so the
 * table stays live between events.
 */
export function elapsedSeconds(
  record: IExperimentRecord,
  nowMs: number
): number | null {
  if (!record.started_at) {
    return null;
  }
  const started = Date.parse(record.started_at);
  if (TERMINAL_STATES.has(record.status) || record.finished_at) {
    if (record.duration !== null && record.duration !== undefined) {
      return record.duration;
    }
    const finished = record.finished_at ? Date.parse(record.finished_at) : NaN;
    return Number.isNaN(started) || Number.isNaN(finished)
      ? null
      : Math.max(0, (finished - started) / 1000);
  }
  return Number.isNaN(started)
    ? record.duration
    : Math.max(0, (nowMs - started) / 1000);
}

/** `42s`, `3m 05s`, `2h 07m`: compact enough for a sidebar column. */
export function formatDuration(seconds: number | null): string {
  if (seconds === null || !Number.isFinite(seconds) || seconds < 0) {
    return '—';
  }
  const whole = Math.floor(seconds);
  if (whole < 60) {
    return `${whole}s`;
  }
  const pad = (n: number) => String(n).padStart(2, '0');
  const minutes = Math.floor(whole / 60);
  if (minutes < 60) {
    return `${minutes}m ${pad(whole % 60)}s`;
  }
  const hours = Math.floor(minutes / 60);
  if (hours < 48) {
    return `${hours}h ${pad(minutes % 60)}m`;
  }
  return `${Math.floor(hours / 24)}d ${pad(hours % 24)}h`;
}

/**
 * The metric to show in the table: the final objective (`default`) once reported, else
 * the first one the trial reported (its primary metric by convention), with its step,
 * e.g. `loss 0.1235 @10`.
 */
export function formatLatestMetric(record: IExperimentRecord): string {
  const entry = primaryMetric(record);
  if (!entry) {
    return '—';
  }
  const [name, value] = entry;
  const shown = typeof value === 'number' ? formatNumber(value) : String(value);
  const step =
    record.step === null || record.step === undefined ? '' : ` @${record.step}`;
  return `${name} ${shown}${step}`;
}

export function formatNumber(value: number): string {
  if (Number.isInteger(value)) {
    return String(value);
  }
  const magnitude = Math.abs(value);
  if (magnitude !== 0 && (magnitude < 1e-3 || magnitude >= 1e6)) {
    return value.toExponential(3);
  }
  return String(Number(value.toPrecision(4)));
}

/** A metric or parameter value in a table cell: numbers formatted, `missing` for none. */
export function formatValue(value: unknown, missing = ''): string {
  if (typeof value === 'number') {
    return formatNumber(value);
  }
  if (value === undefined || value === null) {
    return missing;
  }
  return typeof value === 'string' ? value : JSON.stringify(value);
}

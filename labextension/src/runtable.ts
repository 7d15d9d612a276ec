/**
 * The Compare view's run table as data: which rows to draw, in which order, for a search,
 * a sort on any column and the ticked runs pinned on top. Pure, so jest runs it and the
 * view (`runtablegrid.tsx`) only draws the rows in sight of a 10,000-run list.
 */
import { groupBySweep } from './compare';
import {
  formatParams,
  IExperimentRecord,
  naturalCompare,
  STATES
} from './model';
import { SystemKey, systemValue } from './system';

/** `name`, `status`, `metric:NAME`, `param:NAME` or `system:KEY` (a `system` sum). */
export type RunColumn = string;

export interface IRunSort {
  column: RunColumn;
  descending: boolean;
}

export type RunRow =
  | { kind: 'run'; record: IExperimentRecord; pinned: boolean }
  | { kind: 'group'; sweep: string; ids: string[]; expanded: boolean };

export interface IRunRowsOptions {
  /** The ticked runs, drawn first. */
  pinned: readonly string[];
  collapsed: readonly string[];
  search: string;
  sort: IRunSort | null;
  /** While the pointer is over the table, only these runs (so no row moves under it). */
  frozen: ReadonlySet<string> | null;
  /** "Selected only": the ticked runs and nothing else. */
  selectedOnly?: boolean;
}

export { naturalCompare };

const STATUS_ORDER = new Map<string, number>(STATES.map((s, i) => [s, i]));

function cell(record: IExperimentRecord, column: RunColumn): unknown {
  if (column === 'name') {
    return record.trial !== null
      ? `${record.name} #${record.trial}`
      : record.name;
  }
  if (column === 'status') {
    return STATUS_ORDER.get(record.status) ?? null;
  }
  if (column.startsWith('metric:')) {
    return record.metrics?.[column.slice(7)];
  }
  if (column.startsWith('param:')) {
    return record.params?.[column.slice(6)];
  }
  if (column.startsWith('system:')) {
    return systemValue(record, column.slice(7) as SystemKey);
  }
  return null;
}

/** Numbers before text, text in natural order, missing values last in either direction. */
export function runComparator(
  sort: IRunSort
): (a: IExperimentRecord, b: IExperimentRecord) => number {
  const sign = sort.descending ? -1 : 1;
  return (a, b) => {
    const x = cell(a, sort.column);
    const y = cell(b, sort.column);
    const xMissing = x === null || x === undefined;
    const yMissing = y === null || y === undefined;
    if (xMissing || yMissing) {
      return xMissing === yMissing ? 0 : xMissing ? 1 : -1;
    }
    if (typeof x === 'number' && typeof y === 'number') {
      return sign * (x - y);
    }
    if (typeof x === 'number') {
      return -1;
    }
    if (typeof y === 'number') {
      return 1;
    }
    const text = (v: unknown) =>
      typeof v === 'string' ? v : JSON.stringify(v);
    return sign * naturalCompare(text(x), text(y));
  };
}

/** Does a run match the search box: its name, id, trial, status or parameters? */
export function matchesSearch(
  record: IExperimentRecord,
  search: string
): boolean {
  const words = search.toLowerCase().split(/\s+/).filter(Boolean);
  if (words.length === 0) {
    return true;
  }
  const text = [
    record.name,
    record.id,
    record.trial !== null ? `#${record.trial}` : '',
    record.status,
    formatParams(record.params)
  ]
    .join(' ')
    .toLowerCase();
  return words.every(word => text.includes(word));
}

/**
 * The rows to draw: ticked runs first (pinned, in the sort), then the others, a sweep's
 * trials under a collapsible row. A search hides what does not match, but never a ticked
 * run. Without a sort, runs keep the order they came in (the sidebar's).
 */
export function runRows(
  records: readonly IExperimentRecord[],
  options: IRunRowsOptions
): RunRow[] {
  const ticked = new Set(options.pinned);
  const visible = options.frozen
    ? records.filter(r => options.frozen?.has(r.id))
    : records;
  const order = options.sort ? runComparator(options.sort) : null;
  const sorted = (list: IExperimentRecord[]) =>
    order ? list.slice().sort(order) : list;
  const pinned = sorted(visible.filter(r => ticked.has(r.id)));
  if (options.selectedOnly) {
    return pinned.map(record => ({ kind: 'run', record, pinned: true }));
  }
  const rest = visible.filter(
    r => !ticked.has(r.id) && matchesSearch(r, options.search)
  );
  const trials = new Map<string, string[]>();
  for (const record of visible) {
    if (record.sweep) {
      const ids = trials.get(record.sweep) ?? [];
      ids.push(record.id);
      trials.set(record.sweep, ids);
    }
  }
  const rows: RunRow[] = pinned.map(record => ({
    kind: 'run',
    record,
    pinned: true
  }));
  for (const group of groupBySweep(sorted(rest))) {
    if (group.sweep === null) {
      rows.push(
        ...group.runs.map(record => ({
          kind: 'run' as const,
          record,
          pinned: false
        }))
      );
      continue;
    }
    const expanded = !options.collapsed.includes(group.sweep);
    const runs = order ? group.runs.slice().sort(order) : group.runs;
    rows.push({
      kind: 'group',
      sweep: group.sweep,
      ids: trials.get(group.sweep) ?? [], // ticked ones too: the box ticks them all
      expanded
    });
    if (expanded) {
      rows.push(
        ...runs.map(record => ({ kind: 'run' as const, record, pinned: false }))
      );
    }
  }
  return rows;
}

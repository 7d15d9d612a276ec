/**
 * Sweeps as plain data: the records the server sends (`GET sweeps`, `event: sweep`), the
 * detail with its trials (`GET sweeps/<id>`), and the pure functions the views use.
 */
import { formatNumber, RecordFormatError } from './model';
import { ISystemSums, SystemKey, systemValue } from './system';

export interface IBestTrial {
  trial: number;
  id: string | null;
  value: number;
  params: Record<string, unknown>;
}

export interface ISweepRecord {
  id: string;
  name: string;
  status: string;
  reason: string;
  objective: { metric: string; direction: 'minimize' | 'maximize' };
  tuner: string;
  max_trials: number | null;
  max_duration: number | string | null;
  concurrency: number;
  counts: Record<string, number>;
  trials_started: number;
  finished: number;
  best: IBestTrial | null;
  created_at: string;
  finished_at: string | null;
  duration: number;
}

/** A PBT member's trial: its generation, and the trial and checkpoint step it went on from. */
export interface ITrialLineage {
  generation: number;
  member: number;
  parent: number | null;
  start_step: number;
  exploited?: boolean;
}

/** A trial row: the experiment's record plus the sweep's verdict on it. */
export interface ITrialRow {
  id: string | null;
  trial: number;
  status: string;
  result: string;
  objective: number | null;
  result_reason?: string | null;
  params: Record<string, unknown>;
  metrics: Record<string, number>;
  name?: string;
  /** The trial's run's use of the machine (its record's `system`). */
  system?: ISystemSums | null;
  /** Population based training only. */
  lineage?: ITrialLineage | null;
}

export interface ISweepDetail extends ISweepRecord {
  trials: ITrialRow[];
  importance: Record<string, number> | null;
  spec: Record<string, unknown>;
}

export function parseSweep(value: unknown, path = 'sweep'): ISweepRecord {
  if (typeof value !== 'object' || value === null || Array.isArray(value)) {
    throw new RecordFormatError(path, 'expected a JSON object');
  }
  const body = value as Record<string, unknown>;
  for (const key of ['id', 'name', 'status']) {
    if (typeof body[key] !== 'string' || !body[key]) {
      throw new RecordFormatError(
        `${path}.${key}`,
        'expected a non-empty string'
      );
    }
  }
  const objective = body.objective as ISweepRecord['objective'] | undefined;
  if (!objective || typeof objective.metric !== 'string') {
    throw new RecordFormatError(
      `${path}.objective`,
      'expected {metric, direction}'
    );
  }
  return {
    ...(body as unknown as ISweepRecord),
    counts: (body.counts as Record<string, number>) ?? {},
    best: (body.best as IBestTrial | null) ?? null,
    max_trials: typeof body.max_trials === 'number' ? body.max_trials : null
  };
}

export function parseSweepDetail(value: unknown): ISweepDetail {
  const record = parseSweep(value);
  const body = value as Record<string, unknown>;
  if (!Array.isArray(body.trials)) {
    throw new RecordFormatError('sweep.trials', 'expected a list of trials');
  }
  return {
    ...record,
    trials: body.trials as ITrialRow[],
    importance: (body.importance as Record<string, number> | null) ?? null,
    spec: (body.spec as Record<string, unknown>) ?? {}
  };
}

/** Insert or replace a sweep by id; newest first (ids and creation times sort alike). */
export function applySweep(
  sweeps: readonly ISweepRecord[],
  record: ISweepRecord
): ISweepRecord[] {
  const rest = sweeps.filter(sweep => sweep.id !== record.id);
  return [...rest, record].sort((a, b) =>
    a.created_at === b.created_at
      ? b.id.localeCompare(a.id)
      : b.created_at.localeCompare(a.created_at)
  );
}

/** `finished/max`: the budget part is left out for duration-only sweeps. */
export function formatProgress(sweep: ISweepRecord): string {
  return sweep.max_trials
    ? `${sweep.finished}/${sweep.max_trials}`
    : `${sweep.finished}/${sweep.trials_started}`;
}

/** The share of the budget done, 0..1, for a progress bar (null when unbounded). */
export function progressFraction(sweep: ISweepRecord): number | null {
  if (!sweep.max_trials) {
    return null;
  }
  return Math.min(1, sweep.finished / sweep.max_trials);
}

/** `best loss 0.1235 (#7)` or `no result yet`. */
export function formatBest(sweep: ISweepRecord): string {
  if (!sweep.best) {
    return 'no result yet';
  }
  return `best ${sweep.objective.metric} ${formatNumber(sweep.best.value)} (#${sweep.best.trial})`;
}

/** The parameter names across trials, in first-seen order. */
export function parameterNames(trials: readonly ITrialRow[]): string[] {
  const names: string[] = [];
  const seen = new Set<string>();
  for (const trial of trials) {
    for (const key of Object.keys(trial.params ?? {})) {
      if (!seen.has(key)) {
        seen.add(key);
        names.push(key);
      }
    }
  }
  return names;
}

/** A trials-table column: the trial number, status, the objective, a PBT lineage, or a parameter. */
export type TrialSortKey =
  | 'trial'
  | 'status'
  | 'objective'
  | 'lineage'
  | `param:${string}`
  | `system:${SystemKey}`;

/** `g2 ← #3`: a PBT member's generation and the trial it went on from (`g0` for the first). */
export function lineageText(lineage: ITrialLineage | null | undefined): string {
  if (!lineage) {
    return '';
  }
  const from = lineage.parent === null ? '' : ` ← #${lineage.parent}`;
  return `g${lineage.generation}${from}`;
}

export interface ITrialSort {
  key: TrialSortKey;
  descending: boolean;
}

function trialValue(trial: ITrialRow, key: TrialSortKey): unknown {
  if (key === 'trial' || key === 'status' || key === 'objective') {
    return trial[key];
  }
  if (key === 'lineage') {
    return trial.lineage?.generation;
  }
  if (key.startsWith('system:')) {
    return systemValue(trial, key.slice('system:'.length) as SystemKey);
  }
  return trial.params?.[key.slice('param:'.length)];
}

/**
 * Trials ordered by a column: numbers numerically, anything else as text; trials
 * without a value last in either direction, ties by trial number.
 */
export function sortTrials(
  trials: readonly ITrialRow[],
  sort: ITrialSort
): ITrialRow[] {
  const sign = sort.descending ? -1 : 1;
  return [...trials].sort((a, b) => {
    const x = trialValue(a, sort.key);
    const y = trialValue(b, sort.key);
    const xMissing = x === null || x === undefined;
    const yMissing = y === null || y === undefined;
    if (xMissing || yMissing) {
      return xMissing === yMissing ? a.trial - b.trial : xMissing ? 1 : -1;
    }
    const order =
      typeof x === 'number' && typeof y === 'number'
        ? x - y
        : String(typeof x === 'object' ? JSON.stringify(x) : x).localeCompare(
            String(typeof y === 'object' ? JSON.stringify(y) : y),
            undefined,
            { numeric: true }
          );
    return order === 0 ? a.trial - b.trial : sign * order;
  });
}

/** Click a header: sort by it ascending, or flip the direction when it is the sort. */
export function toggleTrialSort(
  sort: ITrialSort,
  key: TrialSortKey
): ITrialSort {
  return sort.key === key
    ? { key, descending: !sort.descending }
    : { key, descending: false };
}

/**
 * The values each `choice` parameter of a sweep's search space offers, in the order the
 * space lists them (the parallel-coordinates view gives them a category axis).
 */
export function choiceValues(
  spec: Record<string, unknown>
): Record<string, unknown[]> {
  const space = spec.space;
  const choices: Record<string, unknown[]> = {};
  if (typeof space !== 'object' || space === null) {
    return choices;
  }
  for (const [name, entry] of Object.entries(space)) {
    const { _type: type, _value: values } = (entry ?? {}) as {
      _type?: unknown;
      _value?: unknown;
    };
    if (type === 'choice' && Array.isArray(values)) {
      choices[name] = values;
    }
  }
  return choices;
}

/**
 * The value a trials table shows for the objective: the trial's result, or for a trial
 * that has none (pruned, stopped, still running) the last value it reported, marked so.
 */
export function shownObjective(
  trial: ITrialRow,
  metric: string
): { value: number | null; last: boolean } {
  if (trial.objective !== null && trial.objective !== undefined) {
    return { value: trial.objective, last: false };
  }
  const reported = trial.metrics?.[metric];
  return typeof reported === 'number'
    ? { value: reported, last: true }
    : { value: null, last: false };
}

/** `Pruned`, not `Pruned (pruned)`: the result only when it says more than the status. */
export function trialStatusText(trial: ITrialRow): string {
  const result = trial.result ?? '';
  return result &&
    result !== 'complete' &&
    result.toLowerCase() !== String(trial.status).toLowerCase()
    ? `${trial.status} (${result})`
    : String(trial.status);
}

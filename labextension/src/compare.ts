/**
 * Comparing runs, as data: each run's curve for a metric on a step, relative-time or
 * wall-time axis, TensorBoard's debiased smoothing, curves aligned on one x axis for the
 * chart, final values kept apart (a single number is shown as a number, not a chart),
 * and the run table's metric and parameter columns with sweep trials grouped.
 */
import { IMetricPoint } from './api';
import { IExperimentRecord } from './model';

/** The x axis: the reported step, seconds since the run's first report, or the clock. */
export type XAxis = 'step' | 'relative' | 'wall';

export interface ICurve {
  x: number[];
  y: number[];
}

/** Seconds since the epoch of a point's `time` (a number, or an ISO string), or null. */
export function pointTime(point: IMetricPoint): number | null {
  const { time } = point;
  if (typeof time === 'number') {
    return Number.isFinite(time) ? time : null;
  }
  if (typeof time === 'string') {
    const parsed = Date.parse(time);
    return Number.isNaN(parsed) ? null : parsed / 1000;
  }
  return null;
}

/**
 * One run's curve for `metric`: its intermediate (not final) points with a finite value,
 * ordered by x. On the step axis a point without a step takes its position in the list.
 */
export function curve(
  points: readonly IMetricPoint[],
  metric: string,
  axis: XAxis
): ICurve {
  const pairs: [number, number][] = [];
  const times = points.map(pointTime).filter((t): t is number => t !== null);
  const start = times.reduce((a, b) => Math.min(a, b), Infinity);
  points.forEach((point, index) => {
    if (point.final) {
      return;
    }
    const value = point.metrics[metric];
    if (typeof value !== 'number' || !Number.isFinite(value)) {
      return;
    }
    let x: number | null;
    if (axis === 'step') {
      x = point.step ?? index;
    } else {
      x = pointTime(point);
      if (x !== null && axis === 'relative') {
        x -= start;
      }
    }
    if (x !== null) {
      pairs.push([x, value]);
    }
  });
  pairs.sort((a, b) => a[0] - b[0]);
  return { x: pairs.map(p => p[0]), y: pairs.map(p => p[1]) };
}

/**
 * TensorBoard's smoothing: an exponential moving average, debiased so that the first
 * points are not pulled towards zero. `weight` 0 leaves the values as they are.
 */
export function smooth(values: readonly number[], weight: number): number[] {
  if (weight <= 0) {
    return [...values];
  }
  const w = Math.min(weight, 0.999);
  let last = 0;
  let count = 0;
  return values.map(value => {
    last = last * w + (1 - w) * value;
    count += 1;
    return last / (1 - Math.pow(w, count));
  });
}

/**
 * Curves on one shared, sorted x axis (the union of their x values), each with null
 * where it has no point: the columnar layout uPlot draws, gaps spanned per series.
 */
export function align(
  curves: readonly ICurve[]
): [number[], ...(number | null)[][]] {
  const xs = Array.from(new Set(curves.flatMap(c => c.x))).sort(
    (a, b) => a - b
  );
  const position = new Map(xs.map((x, i) => [x, i]));
  const ys = curves.map(c => {
    const column: (number | null)[] = new Array(xs.length).fill(null);
    c.x.forEach((x, i) => (column[position.get(x)!] = c.y[i]));
    return column;
  });
  return [xs, ...ys];
}

/** Values a log axis cannot place (zero, negative) become gaps. */
export function forLogScale(
  column: readonly (number | null)[]
): (number | null)[] {
  return column.map(v => (v !== null && v > 0 ? v : null));
}

/** Each metric's final value (`report_final`; the last one wins). */
export function finalValues(
  points: readonly IMetricPoint[]
): Record<string, number> {
  const values: Record<string, number> = {};
  for (const point of points) {
    if (point.final) {
      Object.assign(values, point.metrics);
    }
  }
  return values;
}

/**
 * The metrics worth a chart across runs (some run has two or more intermediate points)
 * and those to show as values (final-only, or a single point).
 */
export function chartableMetrics(runs: readonly (readonly IMetricPoint[])[]): {
  charts: string[];
  values: string[];
} {
  const counts = new Map<string, number>();
  const seen = new Set<string>();
  for (const points of runs) {
    const perRun = new Map<string, number>();
    for (const point of points) {
      for (const name of Object.keys(point.metrics)) {
        seen.add(name);
        if (!point.final) {
          perRun.set(name, (perRun.get(name) ?? 0) + 1);
        }
      }
    }
    perRun.forEach((n, name) =>
      counts.set(name, Math.max(counts.get(name) ?? 0, n))
    );
  }
  const names = Array.from(seen).sort();
  return {
    charts: names.filter(n => (counts.get(n) ?? 0) >= 2),
    values: names.filter(n => (counts.get(n) ?? 0) < 2)
  };
}

/** The metric and parameter names among `records`, for the table's column choices. */
export function columnKeys(records: readonly IExperimentRecord[]): {
  metrics: string[];
  params: string[];
} {
  const metrics = new Set<string>();
  const params = new Set<string>();
  for (const record of records) {
    Object.keys(record.metrics ?? {}).forEach(k => metrics.add(k));
    Object.keys(record.params ?? {}).forEach(k => params.add(k));
  }
  return {
    metrics: Array.from(metrics).sort(),
    params: Array.from(params).sort()
  };
}

/** A table group: the runs outside any sweep (`sweep` null), or one sweep's trials. */
export interface IRunGroup {
  sweep: string | null;
  runs: IExperimentRecord[];
}

/**
 * Runs grouped for the table: runs outside sweeps first, in the given order, then one
 * group per sweep (in order of its first appearance) with its trials by trial number.
 */
export function groupBySweep(
  records: readonly IExperimentRecord[]
): IRunGroup[] {
  const loose: IExperimentRecord[] = [];
  const sweeps = new Map<string, IExperimentRecord[]>();
  for (const record of records) {
    if (record.sweep) {
      const trials = sweeps.get(record.sweep) ?? [];
      trials.push(record);
      sweeps.set(record.sweep, trials);
    } else {
      loose.push(record);
    }
  }
  const groups: IRunGroup[] = loose.length
    ? [{ sweep: null, runs: loose }]
    : [];
  sweeps.forEach((runs, sweep) =>
    groups.push({
      sweep,
      runs: [...runs].sort((a, b) => (a.trial ?? 0) - (b.trial ?? 0))
    })
  );
  return groups;
}

/**
 * Twenty colours told apart at a glance, readable on JupyterLab's light and dark themes
 * (no near-white or near-black): after twenty, the colours repeat with a dash pattern.
 */
export const RUN_COLOURS = [
  '#4e79a7',
  '#f28e2b',
  '#e15759',
  '#59a14f',
  '#b07aa1',
  '#edc948',
  '#76b7b2',
  '#ff9da7',
  '#9c755f',
  '#7f3c8d',
  '#11a579',
  '#3969ac',
  '#e73f74',
  '#80ba5a',
  '#e68310',
  '#008695',
  '#cf1c90',
  '#a5aa99',
  '#b9770e',
  '#6a3d9a'
];

/** The dash of each round through the colours: solid, long dashes, dots, dash-dot. */
const CYCLE_DASHES: (number[] | undefined)[] = [
  undefined,
  [10, 4],
  [2, 3],
  [10, 3, 2, 3]
];

export function runColour(index: number): string {
  return RUN_COLOURS[index % RUN_COLOURS.length];
}

/** A run's line: its colour, and past the palette a dash pattern, so none look alike. */
export function runStyle(index: number): { colour: string; dash?: number[] } {
  const round = Math.floor(index / RUN_COLOURS.length) % CYCLE_DASHES.length;
  const dash = CYCLE_DASHES[round];
  return dash
    ? { colour: runColour(index), dash }
    : { colour: runColour(index) };
}

/**
 * One stable slot (so colour) per ticked run: a run keeps its slot while ticked, whatever
 * is ticked or unticked around it; a newly ticked run takes the lowest free slot.
 */
export function assignSlots(
  previous: Readonly<Record<string, number>>,
  selected: readonly string[]
): Record<string, number> {
  const slots: Record<string, number> = {};
  const taken = new Set<number>();
  for (const id of selected) {
    if (id in previous) {
      slots[id] = previous[id];
      taken.add(previous[id]);
    }
  }
  let free = 0;
  for (const id of selected) {
    if (!(id in slots)) {
      while (taken.has(free)) {
        free++;
      }
      slots[id] = free;
      taken.add(free);
    }
  }
  return slots;
}

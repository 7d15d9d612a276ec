/**
 * Compare's grouping, as data: the charted runs grouped by sweep, by tag or by a
 * parameter's value, and each group's curves folded into a mean with a min–max band, so
 * twenty seeds of one configuration read as one line with its spread.
 */
import { ICurve } from './compare';
import { IExperimentRecord } from './model';

/** `none`, `sweep`, `tag`, or `param:NAME`. */
export type GroupBy = string;

export const NO_SWEEP = '(no sweep)';
export const NO_TAG = '(no tag)';

/**
 * The groups a run belongs to: its sweep, each of its tags (a run with two tags is in
 * both groups), or its value of the parameter (JSON, so 1 and "1" stay apart).
 */
export function groupKeys(
  record: Pick<IExperimentRecord, 'sweep' | 'tags' | 'params'>,
  by: GroupBy
): string[] {
  if (by === 'sweep') {
    return [record.sweep ?? NO_SWEEP];
  }
  if (by === 'tag') {
    return record.tags?.length ? [...new Set(record.tags)] : [NO_TAG];
  }
  if (by.startsWith('param:')) {
    const name = by.slice('param:'.length);
    const params = record.params ?? {};
    return [name in params ? JSON.stringify(params[name]) : `(no ${name})`];
  }
  return [];
}

export interface ICurveGroup {
  key: string;
  ids: string[];
}

/** The groups of `ids`, in order of their first member, each with its runs in order. */
export function groupRuns(
  ids: readonly string[],
  recordOf: (
    id: string
  ) => Pick<IExperimentRecord, 'sweep' | 'tags' | 'params'> | undefined,
  by: GroupBy
): ICurveGroup[] {
  const groups = new Map<string, string[]>();
  for (const id of ids) {
    const record = recordOf(id);
    if (!record) {
      continue;
    }
    for (const key of groupKeys(record, by)) {
      const members = groups.get(key) ?? [];
      members.push(id);
      groups.set(key, members);
    }
  }
  return Array.from(groups, ([key, members]) => ({ key, ids: members }));
}

export interface IBand {
  x: number[];
  mean: number[];
  min: number[];
  max: number[];
}

/** A curve's value at `x`, linear between its points; undefined outside its range. */
function valueAt(curve: ICurve, x: number): number | undefined {
  const { x: xs, y: ys } = curve;
  if (!xs.length || x < xs[0] || x > xs[xs.length - 1]) {
    return undefined;
  }
  let lo = 0;
  let hi = xs.length - 1;
  while (hi - lo > 1) {
    const mid = (lo + hi) >> 1;
    if (xs[mid] <= x) {
      lo = mid;
    } else {
      hi = mid;
    }
  }
  if (xs[lo] === x) {
    return ys[lo];
  }
  if (xs[hi] === x) {
    return ys[hi];
  }
  const t = (x - xs[lo]) / (xs[hi] - xs[lo]);
  return ys[lo] + t * (ys[hi] - ys[lo]);
}

/**
 * Mean, min and max of a group's curves at every x any of them has. A curve counts where
 * x lies within its first and last point (read linearly between points, so runs
 * reporting at different steps or times still fold together) and not beyond its end.
 */
export function band(curves: readonly ICurve[]): IBand {
  const xs = Array.from(new Set(curves.flatMap(c => c.x))).sort(
    (a, b) => a - b
  );
  const result: IBand = { x: [], mean: [], min: [], max: [] };
  for (const x of xs) {
    const values = curves
      .map(c => valueAt(c, x))
      .filter((v): v is number => v !== undefined);
    if (!values.length) {
      continue;
    }
    result.x.push(x);
    result.mean.push(values.reduce((a, b) => a + b, 0) / values.length);
    result.min.push(Math.min(...values));
    result.max.push(Math.max(...values));
  }
  return result;
}

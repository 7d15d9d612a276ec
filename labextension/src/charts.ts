/**
 * Sweep chart data as pure functions: the objective per trial with its best-so-far
 * line, scales and ticks, and the axes and lines of a parallel-coordinates view. The
 * React components (`objectivechart.tsx`, `parallelcoordinates.tsx`) only draw these.
 */
import { formatNumber } from './model';
import { ITrialRow, parameterNames } from './sweeps';

export interface IPoint {
  x: number;
  y: number;
}

export type Direction = 'minimize' | 'maximize';

/** The objective of each finished trial, by trial number. */
export function objectivePoints(trials: readonly ITrialRow[]): IPoint[] {
  return trials
    .filter(
      trial =>
        typeof trial.objective === 'number' && Number.isFinite(trial.objective)
    )
    .map(trial => ({ x: trial.trial, y: trial.objective as number }))
    .sort((a, b) => a.x - b.x);
}

/** The best value seen up to each point (a running min or max), in x order. */
export function bestSoFar(
  points: readonly IPoint[],
  direction: Direction
): IPoint[] {
  const better =
    direction === 'minimize'
      ? (a: number, b: number) => a < b
      : (a: number, b: number) => a > b;
  const sorted = points.slice().sort((a, b) => a.x - b.x);
  const result: IPoint[] = [];
  let best: number | null = null;
  for (const point of sorted) {
    if (best === null || better(point.y, best)) {
      best = point.y;
    }
    result.push({ x: point.x, y: best });
  }
  return result;
}

/** [min, max] of finite values, or null when there are none. */
export function extent(values: Iterable<number>): [number, number] | null {
  let min = Infinity;
  let max = -Infinity;
  for (const value of values) {
    if (Number.isFinite(value)) {
      min = Math.min(min, value);
      max = Math.max(max, value);
    }
  }
  return min <= max ? [min, max] : null;
}

/** Map `domain` linearly onto `range`; a single-valued domain maps to the middle. */
export function linearScale(
  domain: [number, number],
  range: [number, number]
): (value: number) => number {
  const [d0, d1] = domain;
  const [r0, r1] = range;
  if (d0 === d1) {
    return () => (r0 + r1) / 2;
  }
  return value => r0 + ((value - d0) / (d1 - d0)) * (r1 - r0);
}

/** A log10 scale for positive domains spanning orders of magnitude (learning rates). */
export function logScale(
  domain: [number, number],
  range: [number, number]
): (value: number) => number {
  const linear = linearScale(
    [Math.log10(domain[0]), Math.log10(domain[1])],
    range
  );
  return value => linear(Math.log10(value));
}

/** About `count` round tick values covering [min, max] (1, 2 or 5 × a power of ten). */
export function niceTicks(min: number, max: number, count = 4): number[] {
  if (!Number.isFinite(min) || !Number.isFinite(max)) {
    return [];
  }
  if (min === max) {
    return [min];
  }
  const raw = (max - min) / Math.max(1, count);
  const power = 10 ** Math.floor(Math.log10(raw));
  // The round step nearest the raw one (on a log scale), so about `count` ticks show.
  const step = [1, 2, 5, 10]
    .map(m => m * power)
    .reduce((best, s) =>
      Math.abs(Math.log(s / raw)) < Math.abs(Math.log(best / raw)) ? s : best
    );
  const ticks: number[] = [];
  for (
    let value = Math.ceil(min / step) * step;
    value <= max + step * 1e-9;
    value += step
  ) {
    ticks.push(Number(value.toPrecision(12)));
  }
  return ticks;
}

/** One vertical axis of a parallel-coordinates view; positions run 0 (bottom) to 1 (top). */
export interface IAxis {
  name: string;
  kind: 'linear' | 'log' | 'category';
  position(value: unknown): number | null;
  ticks: { at: number; label: string }[];
}

/**
 * An axis for a parameter's values: numbers get a linear scale, or a log scale when
 * all are positive and span at least two orders of magnitude; anything else (choices
 * of strings, booleans, nested values) is a category axis with evenly spaced values.
 * `choices` (a `choice` parameter's options) makes a category axis in that order,
 * numbers included: batch sizes 32, 64, 128 are three options, not a range.
 */
export function buildAxis(
  name: string,
  values: readonly unknown[],
  choices?: readonly unknown[]
): IAxis {
  const present = values.filter(v => v !== null && v !== undefined);
  const numeric =
    !choices &&
    present.length > 0 &&
    present.every(v => typeof v === 'number' && Number.isFinite(v));
  if (numeric) {
    const [min, max] = extent(present as number[]) as [number, number];
    const log = min > 0 && max / min >= 100;
    const scale = (log ? logScale : linearScale)([min, max], [0, 1]);
    const ticks = log
      ? decades(min, max)
      : niceTicks(min, max, 4).filter(t => t >= min && t <= max);
    const shown = ticks.length ? ticks : [min, max];
    return {
      name,
      kind: log ? 'log' : 'linear',
      position: value =>
        typeof value === 'number' && Number.isFinite(value)
          ? scale(value)
          : null,
      ticks: [...new Set(shown)].map(t => ({
        at: scale(t),
        label: formatNumber(t)
      }))
    };
  }
  const keys = choices
    ? [
        ...new Set([
          ...choices.map(categoryKey),
          ...present.map(categoryKey).sort()
        ])
      ]
    : [...new Set(present.map(categoryKey))].sort();
  const at = linearScale([0, Math.max(0, keys.length - 1)], [0, 1]);
  const index = new Map(keys.map((key, i) => [key, i]));
  return {
    name,
    kind: 'category',
    position: value => {
      if (value === null || value === undefined) {
        return null;
      }
      const i = index.get(categoryKey(value));
      return i === undefined ? null : keys.length === 1 ? 0.5 : at(i);
    },
    ticks: keys.map((key, i) => ({
      at: keys.length === 1 ? 0.5 : at(i),
      label: key
    }))
  };
}

function categoryKey(value: unknown): string {
  if (typeof value === 'string') {
    return value;
  }
  if (typeof value === 'object' && value !== null && '_name' in value) {
    return String((value as { _name: unknown })._name); // a nested choice
  }
  return JSON.stringify(value);
}

function decades(min: number, max: number): number[] {
  const ticks: number[] = [];
  for (
    let e = Math.ceil(Math.log10(min));
    e <= Math.floor(Math.log10(max));
    e++
  ) {
    ticks.push(Number((10 ** e).toPrecision(12)));
  }
  return ticks.length ? ticks : [min, max];
}

export interface IParallelLine {
  trial: number;
  objective: number | null;
  /** One position (0..1) per axis, null where the trial has no value. */
  positions: (number | null)[];
  /** 0 for the worst objective, 1 for the best: the line's colour. */
  quality: number | null;
}

/** Axes for every parameter plus the objective, and one line per trial; `choices`
 * are the `choice` parameters' options (category axes). */
export function parallelCoordinates(
  trials: readonly ITrialRow[],
  objective: string,
  direction: Direction,
  choices: Record<string, readonly unknown[]> = {}
): { axes: IAxis[]; lines: IParallelLine[] } {
  const names = parameterNames(trials);
  const axes = names.map(name =>
    buildAxis(
      name,
      trials.map(t => t.params?.[name]),
      choices[name]
    )
  );
  axes.push(
    buildAxis(
      objective,
      trials.map(t => t.objective)
    )
  );
  const range = extent(
    trials.map(t => t.objective).filter((v): v is number => v !== null)
  );
  const quality = range
    ? linearScale(range, direction === 'minimize' ? [1, 0] : [0, 1])
    : null;
  const lines = trials.map(trial => ({
    trial: trial.trial,
    objective: trial.objective,
    positions: [
      ...names.map((name, i) => axes[i].position(trial.params?.[name])),
      axes[axes.length - 1].position(trial.objective)
    ],
    quality:
      quality && typeof trial.objective === 'number'
        ? quality(trial.objective)
        : null
  }));
  return { axes, lines };
}

/** Whole-number tick spacings for a count axis (trials): 1, 2, 5, 10, 20, 50, …, never 0.5. */
export const INTEGER_INCRS: readonly number[] = Array.from(
  { length: 27 },
  (_, i) => [1, 2, 5][i % 3] * 10 ** Math.floor(i / 3)
);

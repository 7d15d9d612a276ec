/**
 * Brushing parallel coordinates, as data: a brush is a range of an axis's positions
 * (0 bottom, 1 top); a trial passes when it lies inside every brush. And the colour of
 * a trial's line from how good its objective is.
 */
import { IParallelLine } from './charts';

/** Brushed ranges by axis index, each [low, high] in axis positions (0..1). */
export type Brushes = ReadonlyMap<number, readonly [number, number]>;

/** A brush from two pointer positions in either order, clamped to the axis. */
export function brushRange(a: number, b: number): [number, number] {
  const clamp = (v: number) => Math.max(0, Math.min(1, v));
  return [clamp(Math.min(a, b)), clamp(Math.max(a, b))];
}

/** True when the line is inside every brush (a trial without a value on a brushed axis is out). */
export function insideBrushes(line: IParallelLine, brushes: Brushes): boolean {
  for (const [axis, [low, high]] of brushes) {
    const at = line.positions[axis];
    if (
      at === null ||
      at === undefined ||
      at < low - 1e-9 ||
      at > high + 1e-9
    ) {
      return false;
    }
  }
  return true;
}

/** The trial numbers that pass the brushes, or null when nothing is brushed (all pass). */
export function brushedTrials(
  lines: readonly IParallelLine[],
  brushes: Brushes
): Set<number> | null {
  if (brushes.size === 0) {
    return null;
  }
  return new Set(
    lines.filter(line => insideBrushes(line, brushes)).map(line => line.trial)
  );
}

// Viridis from dark violet to yellow, skipping its darkest end so lines read on a dark theme.
const STOPS = [
  [72, 40, 120],
  [62, 73, 137],
  [49, 104, 142],
  [38, 130, 142],
  [31, 158, 137],
  [53, 183, 121],
  [110, 206, 88],
  [181, 222, 43],
  [253, 231, 37]
];

/** The line colour for a quality 0 (worst objective) .. 1 (best); grey without one. */
export function qualityColour(quality: number | null): string {
  if (quality === null || !Number.isFinite(quality)) {
    return 'rgb(150, 150, 150)';
  }
  const t = Math.max(0, Math.min(1, quality)) * (STOPS.length - 1);
  const i = Math.min(STOPS.length - 2, Math.floor(t));
  const f = t - i;
  const [r, g, b] = STOPS[i].map((c, k) =>
    Math.round(c + (STOPS[i + 1][k] - c) * f)
  );
  return `rgb(${r}, ${g}, ${b})`;
}

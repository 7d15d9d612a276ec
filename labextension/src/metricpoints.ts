/**
 * Live metric points as the server folds them (`RunDirectory.metrics`): a resumed run (after
 * a preemption or a Stop) writes a marker `{"resume": STEP, "restart": N}` into its metrics
 * and reports the steps after STEP again, so a view that appends streamed points drops
 * those after STEP when the marker arrives and never draws a marker as a point.
 */
import { IMetricPoint } from './api';

/** `previous` with `incoming` appended, markers applied. */
export function mergePoints(
  previous: readonly IMetricPoint[],
  incoming: readonly unknown[]
): IMetricPoint[] {
  let points = previous.slice();
  for (const item of incoming) {
    if (item === null || typeof item !== 'object') {
      continue;
    }
    if ('resume' in item) {
      const resumed = (item as { resume: unknown }).resume;
      const last = Number.isInteger(resumed) ? (resumed as number) : -1;
      points = points.filter(p => !Number.isInteger(p.step) || p.step! <= last);
    } else if ('metrics' in item) {
      points.push(item as IMetricPoint);
    }
  }
  return points;
}

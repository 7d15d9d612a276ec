import { IMetricPoint } from '../src/api';
import { mergePoints } from '../src/metricpoints';

const point = (step: number | null, loss: number): IMetricPoint => ({
  step,
  metrics: { loss }
});

describe('mergePoints', () => {
  it('appends points and drops those after a resume marker step', () => {
    const before = [point(1, 1), point(2, 0.5), point(3, 0.3), point(null, 9)];
    const merged = mergePoints(before, [
      { resume: 2, restart: 1 },
      point(3, 0.31)
    ]);
    expect(merged).toEqual([
      point(1, 1),
      point(2, 0.5),
      point(null, 9),
      point(3, 0.31)
    ]);
    expect(before).toHaveLength(4); // not changed in place
  });

  it('a resume from the start (no checkpoint) keeps only stepless points', () => {
    const merged = mergePoints(
      [point(1, 1), point(null, 2)],
      [{ resume: -1, restart: 1 }]
    );
    expect(merged).toEqual([point(null, 2)]);
  });

  it('never keeps a marker or a malformed item as a point', () => {
    const merged = mergePoints([], [null, 3, { restart: 1 }, point(1, 1)]);
    expect(merged).toEqual([point(1, 1)]);
  });
});

import {
  bestSoFar,
  buildAxis,
  extent,
  INTEGER_INCRS,
  linearScale,
  logScale,
  niceTicks,
  objectivePoints,
  parallelCoordinates
} from '../src/charts';
import { ITrialRow } from '../src/sweeps';

const trial = (
  n: number,
  objective: number | null,
  params: Record<string, unknown>
): ITrialRow => ({
  id: `t${n}`,
  trial: n,
  status: objective === null ? 'Failed' : 'Succeeded',
  result: objective === null ? 'failed' : 'complete',
  objective,
  params,
  metrics: {}
});

describe('best so far', () => {
  const points = [
    { x: 2, y: 0.5 },
    { x: 0, y: 0.9 },
    { x: 1, y: 0.7 },
    { x: 3, y: 0.8 },
    { x: 4, y: 0.2 }
  ];

  it('is a running minimum in trial order when minimizing', () => {
    expect(bestSoFar(points, 'minimize').map(p => p.y)).toEqual([
      0.9, 0.7, 0.5, 0.5, 0.2
    ]);
  });

  it('is a running maximum when maximizing', () => {
    expect(bestSoFar(points, 'maximize').map(p => p.y)).toEqual([
      0.9, 0.9, 0.9, 0.9, 0.9
    ]);
  });

  it('skips trials without an objective', () => {
    const trials = [trial(1, 0.3, {}), trial(0, null, {}), trial(2, 0.1, {})];
    expect(objectivePoints(trials)).toEqual([
      { x: 1, y: 0.3 },
      { x: 2, y: 0.1 }
    ]);
    expect(bestSoFar([], 'minimize')).toEqual([]);
  });
});

describe('scales', () => {
  it('maps linearly and puts a single value in the middle', () => {
    const scale = linearScale([0, 10], [100, 0]);
    expect(scale(0)).toBe(100);
    expect(scale(2.5)).toBe(75);
    expect(linearScale([3, 3], [0, 10])(3)).toBe(5);
  });

  it('maps decades evenly on a log scale', () => {
    const scale = logScale([1e-4, 1e-1], [0, 3]);
    expect(scale(1e-4)).toBeCloseTo(0);
    expect(scale(1e-3)).toBeCloseTo(1);
    expect(scale(1e-1)).toBeCloseTo(3);
  });

  it('finds extents and round ticks', () => {
    expect(extent([3, NaN, -1, 2])).toEqual([-1, 3]);
    expect(extent([])).toBeNull();
    expect(niceTicks(0, 1, 4)).toEqual([0, 0.2, 0.4, 0.6, 0.8, 1]);
    expect(niceTicks(0.013, 0.087, 3)).toEqual([0.02, 0.04, 0.06, 0.08]);
    expect(niceTicks(5, 5)).toEqual([5]);
  });
});

describe('parallel coordinates', () => {
  it('scales numbers linearly from bottom (min) to top (max)', () => {
    const axis = buildAxis('dropout', [0.1, 0.5, 0.3, null]);
    expect(axis.kind).toBe('linear');
    expect(axis.position(0.1)).toBe(0);
    expect(axis.position(0.5)).toBe(1);
    expect(axis.position(0.3)).toBeCloseTo(0.5);
    expect(axis.position(null)).toBeNull();
    expect(axis.ticks.every(t => t.at >= 0 && t.at <= 1)).toBe(true);
  });

  it('uses a log axis for positive values spanning two decades or more', () => {
    const axis = buildAxis('lr', [1e-4, 1e-3, 1e-2]);
    expect(axis.kind).toBe('log');
    expect(axis.position(1e-3)).toBeCloseTo(0.5);
    expect(axis.ticks.map(t => t.label)).toEqual(['1.000e-4', '0.001', '0.01']);
    expect(buildAxis('x', [1, 50]).kind).toBe('linear');
    expect(buildAxis('x', [-1, 500]).kind).toBe('linear');
  });

  it('spaces categories evenly in sorted order, nested choices by name', () => {
    const axis = buildAxis('act', ['tanh', 'relu', 'gelu', 'relu']);
    expect(axis.kind).toBe('category');
    expect(axis.ticks.map(t => [t.label, t.at])).toEqual([
      ['gelu', 0],
      ['relu', 0.5],
      ['tanh', 1]
    ]);
    const nested = buildAxis('opt', [
      { _name: 'sgd', m: 0.9 },
      { _name: 'adam' }
    ]);
    expect(nested.position({ _name: 'sgd', m: 0.5 })).toBe(1);
    expect(buildAxis('one', ['only']).position('only')).toBe(0.5);
    expect(buildAxis('mixed', [1, 'a']).kind).toBe('category');
  });

  it('builds an axis per parameter plus the objective, one line per trial', () => {
    const trials = [
      trial(0, 0.9, { lr: 0.001, act: 'relu' }),
      trial(1, 0.1, { lr: 0.1, act: 'tanh' }),
      trial(2, null, { lr: 0.01 })
    ];
    const { axes, lines } = parallelCoordinates(trials, 'loss', 'minimize');
    expect(axes.map(a => a.name)).toEqual(['lr', 'act', 'loss']);
    expect(lines[0].positions).toEqual([0, 0, 1]);
    expect(lines[1].positions).toEqual([1, 1, 0]);
    expect(lines[2].positions[0]).toBeCloseTo(0.5);
    expect(lines[2].positions.slice(1)).toEqual([null, null]);
    // The best (lowest) loss gets the strongest colour.
    expect(lines[1].quality).toBe(1);
    expect(lines[0].quality).toBe(0);
    expect(lines[2].quality).toBeNull();
    const max = parallelCoordinates(trials, 'acc', 'maximize');
    expect(max.lines[0].quality).toBe(1);
  });
});

describe('choice parameters', () => {
  it('get a category axis in the order the space lists them, numbers included', () => {
    const axis = buildAxis('batch', [128, 32, 64, 32], [32, 64, 128]);
    expect(axis.kind).toBe('category');
    expect(axis.ticks.map(t => t.label)).toEqual(['32', '64', '128']);
    expect(axis.position(32)).toBe(0);
    expect(axis.position(128)).toBe(1);
    expect(axis.position(16)).toBeNull();
  });

  it('are passed through parallelCoordinates by name', () => {
    const trials = [
      trial(0, 0.5, { batch: 32, lr: 0.1 }),
      trial(1, 0.2, { batch: 128, lr: 0.01 })
    ];
    const { axes, lines } = parallelCoordinates(trials, 'loss', 'minimize', {
      batch: [32, 64, 128]
    });
    expect(axes.map(a => a.kind)).toEqual(['category', 'linear', 'linear']);
    expect(lines[1].positions[0]).toBe(1);
  });
});

describe('a trial axis', () => {
  it('ticks at whole numbers only (no trial 2.5)', () => {
    expect(INTEGER_INCRS[0]).toBe(1);
    expect(INTEGER_INCRS.every(step => Number.isInteger(step))).toBe(true);
    expect(INTEGER_INCRS.slice(0, 6)).toEqual([1, 2, 5, 10, 20, 50]);
  });
});

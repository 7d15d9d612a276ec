import { IMetricPoint } from '../src/api';
import {
  align,
  chartableMetrics,
  columnKeys,
  curve,
  finalValues,
  forLogScale,
  groupBySweep,
  runColour,
  runStyle,
  assignSlots,
  smooth
} from '../src/compare';
import { IExperimentRecord } from '../src/model';

const points: IMetricPoint[] = [
  { step: 2, metrics: { loss: 0.5, acc: 0.2 }, time: 102 },
  { step: 0, metrics: { loss: 1 }, time: 100 },
  { step: 1, metrics: { loss: NaN, acc: 0.1 }, time: '1970-01-01T00:01:41Z' },
  { step: null, final: true, metrics: { default: 0.9, loss: 0.4 }, time: 103 }
];

const record = (
  id: string,
  extra: Partial<IExperimentRecord> = {}
): IExperimentRecord => ({
  id,
  name: id,
  status: 'Succeeded',
  reason: '',
  exit_code: 0,
  created_at: '',
  started_at: null,
  finished_at: null,
  duration: null,
  params: {},
  tags: [],
  sweep: null,
  trial: null,
  metrics: {},
  step: null,
  resources: {},
  replicas: 1,
  framework: 'none',
  backend: 'local',
  pipeline: null,
  pipeline_step: null,
  ...extra
});

describe('curve', () => {
  it('takes intermediate finite points ordered by step', () => {
    expect(curve(points, 'loss', 'step')).toEqual({ x: [0, 2], y: [1, 0.5] });
    expect(curve(points, 'acc', 'step')).toEqual({ x: [1, 2], y: [0.1, 0.2] });
  });

  it('puts points on wall time or time since the first report', () => {
    expect(curve(points, 'acc', 'wall')).toEqual({
      x: [101, 102],
      y: [0.1, 0.2]
    });
    expect(curve(points, 'loss', 'relative')).toEqual({
      x: [0, 2],
      y: [1, 0.5]
    });
  });

  it('places points without a step by their position', () => {
    const loose = [
      { step: null, metrics: { x: 3 } },
      { step: null, metrics: { x: 4 } }
    ];
    expect(curve(loose, 'x', 'step')).toEqual({ x: [0, 1], y: [3, 4] });
  });
});

describe('smooth', () => {
  it('leaves values alone at weight 0 and debiases the first point', () => {
    expect(smooth([1, 2, 3], 0)).toEqual([1, 2, 3]);
    const smoothed = smooth([1, 2, 3], 0.6);
    expect(smoothed[0]).toBeCloseTo(1);
    expect(smoothed[1]).toBeCloseTo((0.4 * 0.6 + 0.4 * 2) / (1 - 0.36));
    expect(smoothed[2]).toBeLessThan(3);
    expect(smoothed[2]).toBeGreaterThan(smoothed[1]);
  });
});

describe('align', () => {
  it('puts curves on the union of their x values with gaps', () => {
    expect(
      align([
        { x: [0, 2], y: [1, 0.5] },
        { x: [1, 2, 3], y: [9, 8, 7] }
      ])
    ).toEqual([
      [0, 1, 2, 3],
      [1, null, 0.5, null],
      [null, 9, 8, 7]
    ]);
  });

  it('turns values a log axis cannot show into gaps', () => {
    expect(forLogScale([1, 0, -2, null, 0.1])).toEqual([
      1,
      null,
      null,
      null,
      0.1
    ]);
  });
});

describe('final values and which metrics get a chart', () => {
  it('keeps the last final report per metric', () => {
    expect(finalValues(points)).toEqual({ default: 0.9, loss: 0.4 });
  });

  it('charts a metric with two or more points somewhere, shows the rest as values', () => {
    const single: IMetricPoint[] = [{ step: 0, metrics: { lr: 0.1 } }];
    expect(chartableMetrics([points, single])).toEqual({
      charts: ['acc', 'loss'],
      values: ['default', 'lr']
    });
  });
});

describe('run table', () => {
  const rows = [
    record('t2', {
      sweep: 's1',
      trial: 2,
      params: { x: 1 },
      metrics: { loss: 1 }
    }),
    record('a', { params: { lr: 0.1 }, metrics: { acc: 0.5 } }),
    record('t1', { sweep: 's1', trial: 1 }),
    record('u1', { sweep: 's2', trial: 0 }),
    record('b')
  ];

  it('lists every metric and parameter once, sorted', () => {
    expect(columnKeys(rows)).toEqual({
      metrics: ['acc', 'loss'],
      params: ['lr', 'x']
    });
  });

  it('groups trials under their sweep, by trial number, after the other runs', () => {
    expect(
      groupBySweep(rows).map(g => [g.sweep, g.runs.map(r => r.id)])
    ).toEqual([
      [null, ['a', 'b']],
      ['s1', ['t1', 't2']],
      ['s2', ['u1']]
    ]);
  });

  it('gives twenty runs distinct colours, then dashes', () => {
    const indices = [...Array(20).keys()];
    expect(new Set(indices.map(runColour)).size).toBe(20);
    expect(runColour(10)).not.toBe(runColour(0)); // trials #0 and #10 of a sweep
    expect(runStyle(3).dash).toBeUndefined();
    expect(runStyle(20).colour).toBe(runStyle(0).colour);
    expect(runStyle(20).dash).toBeDefined();
    expect(runStyle(40).dash).not.toEqual(runStyle(20).dash);
  });

  it('keeps a run its colour while others are ticked and unticked', () => {
    let slots = assignSlots({}, ['a', 'b', 'c']);
    expect(slots).toEqual({ a: 0, b: 1, c: 2 });
    slots = assignSlots(slots, ['a', 'c']);
    expect(slots).toEqual({ a: 0, c: 2 });
    slots = assignSlots(slots, ['a', 'c', 'd', 'e']);
    expect(slots).toEqual({ a: 0, c: 2, d: 1, e: 3 });
  });
});

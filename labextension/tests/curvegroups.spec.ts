import {
  band,
  groupKeys,
  groupRuns,
  NO_SWEEP,
  NO_TAG
} from '../src/curvegroups';

const run = (
  sweep: string | null,
  tags: string[],
  params: Record<string, unknown>
) => ({ sweep, tags, params });

describe('groupKeys', () => {
  it('groups by sweep, loose runs together', () => {
    expect(groupKeys(run('s1', [], {}), 'sweep')).toEqual(['s1']);
    expect(groupKeys(run(null, [], {}), 'sweep')).toEqual([NO_SWEEP]);
  });

  it('puts a run in each of its tags, untagged runs together', () => {
    expect(groupKeys(run(null, ['a', 'b', 'a'], {}), 'tag')).toEqual([
      'a',
      'b'
    ]);
    expect(groupKeys(run(null, [], {}), 'tag')).toEqual([NO_TAG]);
  });

  it('groups by a parameter value, keeping 1 and "1" apart', () => {
    expect(groupKeys(run(null, [], { lr: 1 }), 'param:lr')).toEqual(['1']);
    expect(groupKeys(run(null, [], { lr: '1' }), 'param:lr')).toEqual(['"1"']);
    expect(groupKeys(run(null, [], {}), 'param:lr')).toEqual(['(no lr)']);
  });

  it('groups nothing when not grouping', () => {
    expect(groupKeys(run('s', ['a'], { lr: 1 }), 'none')).toEqual([]);
  });
});

describe('groupRuns', () => {
  it('keeps the order of first members and skips unknown runs', () => {
    const records: Record<string, ReturnType<typeof run>> = {
      a: run(null, [], { lr: 0.1 }),
      b: run(null, [], { lr: 0.2 }),
      c: run(null, [], { lr: 0.1 })
    };
    expect(
      groupRuns(['b', 'a', 'x', 'c'], id => records[id], 'param:lr')
    ).toEqual([
      { key: '0.2', ids: ['b'] },
      { key: '0.1', ids: ['a', 'c'] }
    ]);
  });
});

describe('band', () => {
  it('gives the mean, min and max at each shared x', () => {
    const folded = band([
      { x: [0, 1, 2], y: [1, 2, 3] },
      { x: [0, 1, 2], y: [3, 4, 5] },
      { x: [0, 1, 2], y: [2, 9, 1] }
    ]);
    expect(folded).toEqual({
      x: [0, 1, 2],
      mean: [2, 5, 3],
      min: [1, 2, 1],
      max: [3, 9, 5]
    });
  });

  it('reads curves linearly between their points and not past their ends', () => {
    const folded = band([
      { x: [0, 2], y: [0, 4] },
      { x: [1, 3], y: [10, 10] }
    ]);
    expect(folded.x).toEqual([0, 1, 2, 3]);
    // x=0: only the first; x=1: 2 (interpolated) and 10; x=2: 4 and 10; x=3: only the second.
    expect(folded.mean).toEqual([0, 6, 7, 10]);
    expect(folded.min).toEqual([0, 2, 4, 10]);
    expect(folded.max).toEqual([0, 10, 10, 10]);
  });

  it('is empty for no curves', () => {
    expect(band([])).toEqual({ x: [], mean: [], min: [], max: [] });
  });
});

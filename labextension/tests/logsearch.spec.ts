import { findMatches, segments, stepMatch } from '../src/logsearch';

describe('log search', () => {
  const log = 'epoch 1 loss 0.5\nEpoch 2 loss 0.25\nTraceback: ValueError\n';

  it('finds every match ignoring case', () => {
    expect(findMatches(log, 'epoch').map(m => m.start)).toEqual([0, 17]);
    expect(findMatches(log, '')).toEqual([]);
    expect(findMatches('aaaa', 'aa')).toHaveLength(2); // no overlaps
    expect(findMatches('aaaa', 'a', 3)).toHaveLength(3);
  });

  it('cuts the log into pieces that join back into it', () => {
    const matches = findMatches(log, 'loss');
    const pieces = segments(log, matches);
    expect(pieces.map(p => p.text).join('')).toBe(log);
    expect(pieces.filter(p => p.match !== null).map(p => p.match)).toEqual([
      0, 1
    ]);
    expect(segments('', [])).toEqual([{ text: '', match: null }]);
  });

  it('steps to the next and previous match with wrap-around', () => {
    expect(stepMatch(-1, 3, 1)).toBe(0);
    expect(stepMatch(-1, 3, -1)).toBe(2);
    expect(stepMatch(2, 3, 1)).toBe(0);
    expect(stepMatch(0, 3, -1)).toBe(2);
    expect(stepMatch(0, 0, 1)).toBe(-1);
  });
});

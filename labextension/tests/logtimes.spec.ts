import { timePieces } from '../src/logtimes';

describe('timePieces', () => {
  it('cuts each line start time out of the text', () => {
    const text =
      '2026-11-24T01:07:54.123456Z epoch 1\n2026-11-24T01:07:55.5Z epoch 2\n';
    expect(timePieces(text, true)).toEqual([
      { text: '2026-11-24T01:07:54.123456Z ', time: true },
      { text: 'epoch 1\n', time: false },
      { text: '2026-11-24T01:07:55.5Z ', time: true },
      { text: 'epoch 2\n', time: false }
    ]);
  });

  it('finds no time in the middle of a line', () => {
    const text = '2026-11-24T01:07:54Z said earlier\n';
    expect(timePieces(text, false)).toEqual([{ text, time: false }]);
    expect(timePieces('x 2026-11-24T01:07:54Z y', true)).toEqual([
      { text: 'x 2026-11-24T01:07:54Z y', time: false }
    ]);
  });
});

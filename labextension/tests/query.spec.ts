import { KubelabApiError } from '../src/api';
import { Debouncer, markError, normalizeQuery, queryError } from '../src/query';

describe('queryError', () => {
  it('reads the position and reason the server gives for a bad query', () => {
    const error = new KubelabApiError(422, 'invalid', 'invalid query', [
      {
        path: 'query',
        reason: "position 8: unknown status 'sleeping'; did you mean 'Stopped'?"
      }
    ]);
    expect(queryError(error)).toEqual({
      message: "position 8: unknown status 'sleeping'; did you mean 'Stopped'?",
      index: 7
    });
  });

  it('keeps a reason without a position', () => {
    const error = new KubelabApiError(422, 'invalid', '', [
      { path: 'query', reason: 'too long' }
    ]);
    expect(queryError(error)).toEqual({ message: 'too long', index: null });
  });

  it('ignores errors that are not about the query', () => {
    expect(
      queryError(
        new KubelabApiError(422, 'invalid', '', [
          { path: 'sort', reason: 'position 1: x' }
        ])
      )
    ).toBeNull();
    expect(queryError(new KubelabApiError(500, 'server', 'boom'))).toBeNull();
    expect(queryError(new Error('network'))).toBeNull();
  });
});

describe('markError', () => {
  it('splits around the offending character', () => {
    expect(markError('status:sleeping', 7)).toEqual({
      before: 'status:',
      at: 's',
      after: 'leeping'
    });
  });

  it('marks the end when the problem is a missing part', () => {
    expect(markError('status:', 7)).toEqual({
      before: 'status:',
      at: ' ',
      after: ''
    });
  });

  it('marks nothing without a position', () => {
    expect(markError('x', null)).toEqual({ before: 'x', at: '', after: '' });
  });
});

describe('Debouncer', () => {
  beforeEach(() => jest.useFakeTimers());
  afterEach(() => jest.useRealTimers());

  it('applies the last value once typing pauses', () => {
    const applied: string[] = [];
    const debouncer = new Debouncer<string>(v => applied.push(v), 400);
    debouncer.schedule('s');
    jest.advanceTimersByTime(200);
    debouncer.schedule('st');
    jest.advanceTimersByTime(399);
    expect(applied).toEqual([]);
    jest.advanceTimersByTime(1);
    expect(applied).toEqual(['st']);
  });

  it('flushes at once on Enter and cancels on dispose', () => {
    const applied: string[] = [];
    const debouncer = new Debouncer<string>(v => applied.push(v), 400);
    debouncer.schedule('a');
    debouncer.flush();
    expect(applied).toEqual(['a']);
    debouncer.flush();
    expect(applied).toEqual(['a']); // nothing pending
    debouncer.schedule('b');
    debouncer.cancel();
    jest.advanceTimersByTime(1000);
    expect(applied).toEqual(['a']);
  });

  it('normalizes surrounding space', () => {
    expect(normalizeQuery('  status:running ')).toBe('status:running');
  });
});

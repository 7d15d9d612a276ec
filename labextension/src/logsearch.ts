/**
 * Searching a log as text: where a query occurs (case-insensitive), the log cut into
 * plain and matched pieces for highlighting, and moving between matches with wrap-around.
 */

export interface ILogMatch {
  start: number;
  end: number;
}

/** Every occurrence of `query` in `text`, ignoring case; at most `limit` of them. */
export function findMatches(
  text: string,
  query: string,
  limit = 5000
): ILogMatch[] {
  if (!query) {
    return [];
  }
  const haystack = text.toLowerCase();
  const needle = query.toLowerCase();
  const matches: ILogMatch[] = [];
  let from = 0;
  while (matches.length < limit) {
    const at = haystack.indexOf(needle, from);
    if (at < 0) {
      break;
    }
    matches.push({ start: at, end: at + needle.length });
    from = at + needle.length;
  }
  return matches;
}

/** A piece of the log: plain text, or the match with index `match`. */
export interface ILogSegment {
  text: string;
  match: number | null;
}

/** `text` cut at the matches, in order, so that the pieces join back into `text`. */
export function segments(
  text: string,
  matches: readonly ILogMatch[]
): ILogSegment[] {
  const pieces: ILogSegment[] = [];
  let at = 0;
  matches.forEach((m, i) => {
    if (m.start > at) {
      pieces.push({ text: text.slice(at, m.start), match: null });
    }
    pieces.push({ text: text.slice(m.start, m.end), match: i });
    at = m.end;
  });
  if (at < text.length || pieces.length === 0) {
    pieces.push({ text: text.slice(at), match: null });
  }
  return pieces;
}

/** The next (`step` 1) or previous (-1) match after `current`, wrapping around. */
export function stepMatch(
  current: number,
  count: number,
  step: 1 | -1
): number {
  if (count === 0) {
    return -1;
  }
  if (current < 0) {
    return step === 1 ? 0 : count - 1;
  }
  return (current + step + count) % count;
}

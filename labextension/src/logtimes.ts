/**
 * A log read with `timestamps=1`: each line starts with its time (ISO 8601 UTC) and a
 * space. The view shows those times as a muted column, so they are cut out of the text here.
 */

const STAMP = /^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(\.\d+)?Z /;

/** A piece of log text: a line's time (with its space), or the log's own text. */
export interface ITimePiece {
  text: string;
  time: boolean;
}

/**
 * `text` cut into times and text. `atLineStart` says whether `text` begins a line (a piece
 * of a longer log may start mid-line, where nothing is a time).
 */
export function timePieces(text: string, atLineStart: boolean): ITimePiece[] {
  const pieces: ITimePiece[] = [];
  let start = atLineStart;
  for (const line of text.split(/(?<=\n)/)) {
    const stamp = start ? STAMP.exec(line) : null;
    if (stamp) {
      pieces.push({ text: stamp[0], time: true });
    }
    const rest = stamp ? line.slice(stamp[0].length) : line;
    if (rest) {
      pieces.push({ text: rest, time: false });
    }
    start = line.endsWith('\n');
  }
  return pieces;
}

/**
 * Row virtualization for long tables: only the rows in view (plus a margin) exist in
 * the DOM, so 10,000 experiments cost as much to render as a screenful.
 */

export interface IWindow {
  /** First row to render. */
  start: number;
  /** One past the last row to render. */
  end: number;
  /** Pixels of empty space above the first rendered row. */
  offsetTop: number;
  /** Height of the whole list, for the scroll bar. */
  totalHeight: number;
}

/** The rows to render for a viewport of fixed-height rows. */
export function visibleWindow(
  count: number,
  rowHeight: number,
  scrollTop: number,
  viewportHeight: number,
  overscan = 8
): IWindow {
  const totalHeight = count * rowHeight;
  if (count === 0 || rowHeight <= 0) {
    return { start: 0, end: 0, offsetTop: 0, totalHeight };
  }
  const maxScroll = Math.max(0, totalHeight - viewportHeight);
  const top = Math.min(Math.max(0, scrollTop), maxScroll);
  const first = Math.floor(top / rowHeight);
  const shown = Math.ceil(Math.max(viewportHeight, rowHeight) / rowHeight) + 1;
  const start = Math.max(0, first - overscan);
  const end = Math.min(count, first + shown + overscan);
  return { start, end, offsetTop: start * rowHeight, totalHeight };
}

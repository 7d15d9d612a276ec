/**
 * Keyboard navigation of a data grid (WAI-ARIA's grid pattern): arrows move between
 * cells, Home/End to the row's ends, Ctrl+Home/End to the first/last row, Page Up/Down
 * by a page. Row 0 is the header row. Pure, so the rules are tested without a browser.
 */

export interface ICellPosition {
  row: number;
  col: number;
}

export const PAGE_ROWS = 10;

/** Where `key` moves the focus from `at` in a `rows` × `cols` grid, or null for other keys. */
export function moveInGrid(
  key: string,
  at: ICellPosition,
  rows: number,
  cols: number,
  ctrl = false
): ICellPosition | null {
  const clamp = (row: number, col: number): ICellPosition => ({
    row: Math.max(0, Math.min(rows - 1, row)),
    col: Math.max(0, Math.min(cols - 1, col))
  });
  switch (key) {
    case 'ArrowDown':
      return clamp(at.row + 1, at.col);
    case 'ArrowUp':
      return clamp(at.row - 1, at.col);
    case 'ArrowRight':
      return clamp(at.row, at.col + 1);
    case 'ArrowLeft':
      return clamp(at.row, at.col - 1);
    case 'Home':
      return ctrl ? clamp(0, at.col) : clamp(at.row, 0);
    case 'End':
      return ctrl ? clamp(rows - 1, at.col) : clamp(at.row, cols - 1);
    case 'PageDown':
      return clamp(at.row + PAGE_ROWS, at.col);
    case 'PageUp':
      return clamp(at.row - PAGE_ROWS, at.col);
    default:
      return null;
  }
}

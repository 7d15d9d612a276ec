import { moveInGrid, PAGE_ROWS } from '../src/grid';

describe('grid keyboard navigation', () => {
  const at = { row: 3, col: 2 };

  it('moves one cell with the arrows and stops at the edges', () => {
    expect(moveInGrid('ArrowDown', at, 10, 5)).toEqual({ row: 4, col: 2 });
    expect(moveInGrid('ArrowUp', at, 10, 5)).toEqual({ row: 2, col: 2 });
    expect(moveInGrid('ArrowLeft', at, 10, 5)).toEqual({ row: 3, col: 1 });
    expect(moveInGrid('ArrowRight', at, 10, 5)).toEqual({ row: 3, col: 3 });
    expect(moveInGrid('ArrowUp', { row: 0, col: 0 }, 10, 5)).toEqual({
      row: 0,
      col: 0
    });
    expect(moveInGrid('ArrowRight', { row: 9, col: 4 }, 10, 5)).toEqual({
      row: 9,
      col: 4
    });
  });

  it('goes to the row ends with Home/End, to the first/last row with Ctrl', () => {
    expect(moveInGrid('Home', at, 10, 5)).toEqual({ row: 3, col: 0 });
    expect(moveInGrid('End', at, 10, 5)).toEqual({ row: 3, col: 4 });
    expect(moveInGrid('Home', at, 10, 5, true)).toEqual({ row: 0, col: 2 });
    expect(moveInGrid('End', at, 10, 5, true)).toEqual({ row: 9, col: 2 });
  });

  it('pages by PAGE_ROWS rows, clamped', () => {
    expect(moveInGrid('PageDown', { row: 0, col: 0 }, 100, 5)).toEqual({
      row: PAGE_ROWS,
      col: 0
    });
    expect(moveInGrid('PageUp', at, 100, 5)).toEqual({ row: 0, col: 2 });
  });

  it('ignores other keys', () => {
    expect(moveInGrid('a', at, 10, 5)).toBeNull();
    expect(moveInGrid('Enter', at, 10, 5)).toBeNull();
  });
});

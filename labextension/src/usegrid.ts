/**
 * Grid keyboard behaviour for a `role="grid"` element (the experiments table, the trials
 * table): one roving tab stop, arrow keys between cells (`grid.ts`), Enter or Space on a
 * header sorts (clicks it), Enter on a row opens it (clicks the cell, which bubbles to the
 * row). Rows carry `aria-rowindex` (1 for the header), so a virtualized table whose row
 * is not in the page yet is asked to scroll to it first. The table gives its cells (or
 * their one widget, marked `data-grid-focus`) `tabIndex={-1}`; this hook moves the one 0.
 */
import { RefObject, useLayoutEffect, useRef } from 'react';

import { ICellPosition, moveInGrid } from './grid';

const CELL =
  ':scope > [role="gridcell"], :scope > [role="columnheader"], :scope > [role="rowheader"]';

/** The element that takes the focus for a cell: its own widget (a menu button) or itself. */
function focusTarget(cell: Element): HTMLElement {
  return (cell.querySelector('[data-grid-focus]') as HTMLElement) ?? cell;
}

function rowElement(grid: HTMLElement, row: number): HTMLElement | null {
  return grid.querySelector(`[role="row"][aria-rowindex="${row + 1}"]`);
}

function cellsOf(row: Element): HTMLElement[] {
  return Array.from(row.querySelectorAll(CELL)) as HTMLElement[];
}

export interface IGridOptions {
  /** Rows including the header row. */
  rows: number;
  cols: number;
  /** Bring a row that is not in the page (virtualized) into it. */
  scrollToRow?(row: number): void;
}

/** Returns the grid's `onKeyDown` and `onFocus` handlers; keeps one cell tabbable. */
export function useGrid(
  ref: RefObject<HTMLElement>,
  options: IGridOptions
): {
  onKeyDown(event: React.KeyboardEvent): void;
  onFocus(event: React.FocusEvent): void;
} {
  const active = useRef<ICellPosition>({ row: 1, col: 0 });
  // After every render: exactly one tab stop, the active cell (or the first one shown).
  // Cells and their widgets carry tabIndex -1 from the table itself, so this touches only
  // the stop, however long the table.
  useLayoutEffect(() => {
    const grid = ref.current;
    if (!grid) {
      return;
    }
    const { row, col } = active.current;
    const element = rowElement(grid, row);
    const cells = element ? cellsOf(element) : [];
    let cell: Element | undefined = cells[Math.min(col, cells.length - 1)];
    if (!cell) {
      const first =
        grid.querySelector('[role="row"]:not([aria-rowindex="1"])') ??
        grid.querySelector('[role="row"]');
      cell = first ? cellsOf(first)[0] : undefined;
    }
    const stop = cell ? focusTarget(cell) : null;
    if (stop && stop.getAttribute('tabindex') !== '0') {
      grid
        .querySelectorAll('[tabindex="0"]')
        .forEach(node => node.setAttribute('tabindex', '-1'));
      stop.setAttribute('tabindex', '0');
    }
  });

  const focusCell = (at: ICellPosition, tries = 4): void => {
    const grid = ref.current;
    const row = grid ? rowElement(grid, at.row) : null;
    if (!grid || !row) {
      if (tries > 0) {
        options.scrollToRow?.(at.row);
        requestAnimationFrame(() => focusCell(at, tries - 1));
      }
      return;
    }
    const cells = cellsOf(row);
    const cell = cells[Math.min(at.col, cells.length - 1)];
    if (!cell) {
      return;
    }
    active.current = { row: at.row, col: cells.indexOf(cell) };
    grid
      .querySelectorAll('[tabindex="0"]')
      .forEach(node => node.setAttribute('tabindex', '-1'));
    const target = focusTarget(cell);
    target.setAttribute('tabindex', '0');
    // No scrolling by focus (it would jump sideways to a cell at the far right); bring
    // the cell into view only as far as needed.
    target.focus({ preventScroll: true });
    cell.scrollIntoView?.({ block: 'nearest', inline: 'nearest' });
  };

  const positionOf = (
    node: EventTarget | null
  ): { at: ICellPosition; cell: HTMLElement } | null => {
    const element = node instanceof Element ? node : null;
    const row = element?.closest('[role="row"]');
    if (!row) {
      return null;
    }
    const cells = cellsOf(row);
    const cell = cells.find(c => c === element || c.contains(element));
    if (!cell) {
      return null;
    }
    return {
      at: {
        row: Number(row.getAttribute('aria-rowindex')) - 1,
        col: cells.indexOf(cell)
      },
      cell
    };
  };

  return {
    onFocus(event) {
      const found = positionOf(event.target);
      if (found) {
        active.current = found.at;
      }
    },
    onKeyDown(event) {
      const target = event.target as HTMLElement;
      if (
        target.matches('input[type="text"], input[type="search"], textarea')
      ) {
        return;
      }
      const found = positionOf(target);
      if (!found) {
        return;
      }
      const { at, cell } = found;
      if (
        (event.key === 'Enter' || event.key === ' ') &&
        target === focusTarget(cell) &&
        target === cell
      ) {
        const header = cell.getAttribute('role') === 'columnheader';
        if (event.key === 'Enter' || header) {
          event.preventDefault();
          cell.click();
        }
        return;
      }
      const next = moveInGrid(
        event.key,
        at,
        options.rows,
        options.cols,
        event.ctrlKey || event.metaKey
      );
      if (next) {
        event.preventDefault();
        focusCell(next);
      }
    }
  };
}

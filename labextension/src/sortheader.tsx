/**
 * A sortable column's header, one for every table (the sidebar's experiments, the Compare
 * view's runs, a sweep's trials): its `aria-sort`, the "Sort by" title and the ▴/▾ mark
 * after its label. A click sorts; in a grid (`usegrid.ts`) Enter or Space clicks it.
 */
import { TranslationBundle } from '@jupyterlab/translation';
import React from 'react';

export interface ISortHeaderProps {
  column: string;
  label: string;
  /** Whether the table is sorted by this column, and which way. */
  active: boolean;
  descending: boolean;
  trans: TranslationBundle;
  onSort(): void;
  className?: string;
  /**
   * The cell's element: a table's `th` (the default) or a `div` in a CSS grid. With
   * `button`, a `th` holds a button of that class that takes the focus and the click.
   */
  as?: 'th' | 'div';
  button?: string;
}

export function SortHeader(props: ISortHeaderProps): JSX.Element {
  const { active, descending, label } = props;
  const title = props.trans.__('Sort by %1', label);
  const content = (
    <>
      {label}
      {active ? (descending ? ' ▾' : ' ▴') : ''}
    </>
  );
  const cell = {
    role: 'columnheader',
    tabIndex: -1,
    className: props.className,
    'data-column': props.column,
    'aria-sort': active ? (descending ? 'descending' : 'ascending') : 'none'
  } as const;
  if (props.as === 'div') {
    return (
      <div {...cell} title={title} onClick={props.onSort}>
        {content}
      </div>
    );
  }
  if (props.button !== undefined) {
    return (
      <th scope="col" {...cell}>
        <button
          className={props.button}
          data-grid-focus=""
          tabIndex={-1}
          title={title}
          onClick={props.onSort}
        >
          {content}
        </button>
      </th>
    );
  }
  return (
    <th scope="col" {...cell} title={title} onClick={props.onSort}>
      {content}
    </th>
  );
}

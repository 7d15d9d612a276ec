/**
 * The experiments section: the PQL filter box and a virtualized, sortable table. Only
 * the rows in view are in the DOM (`virtual.ts`), so 10,000 experiments scroll as
 * smoothly as ten.
 */
import { Time } from '@jupyterlab/coreutils';
import { TranslationBundle } from '@jupyterlab/translation';
import React, { useEffect, useMemo, useRef, useState } from 'react';

import {
  Column,
  elapsedSeconds,
  formatDuration,
  formatGpus,
  formatLatestMetric,
  formatParams,
  IExperimentRecord,
  ISortOrder,
  SortColumn,
  toggleSort
} from './model';
import { Debouncer, IQueryError, markError } from './query';
import { SortHeader } from './sortheader';
import { useGrid } from './usegrid';
import { visibleWindow } from './virtual';

export const ROW_HEIGHT = 28;
/** The pause in typing after which the filter applies (within the 150 ms target). */
export const QUERY_DEBOUNCE_MS = 80;

const WIDTHS: Record<Column, string> = {
  name: 'minmax(110px, 2fr)',
  status: '104px',
  started: '92px',
  duration: '68px',
  gpus: '56px',
  params: 'minmax(90px, 1.5fr)',
  metric: 'minmax(100px, 1fr)'
};
const MIN_WIDTHS: Record<Column, number> = {
  name: 110,
  status: 104,
  started: 92,
  duration: 68,
  gpus: 56,
  params: 90,
  metric: 100
};

export interface ITableProps {
  rows: readonly IExperimentRecord[];
  columns: readonly Column[];
  sort: ISortOrder;
  now: number;
  trans: TranslationBundle;
  onSort(sort: ISortOrder): void;
  onOpen(id: string): void;
  onMenu(id: string, x: number, y: number): void;
}

function headerLabel(column: Column, trans: TranslationBundle): string {
  switch (column) {
    case 'name':
      return trans.__('Name');
    case 'status':
      return trans.__('Status');
    case 'started':
      return trans.__('Started');
    case 'duration':
      return trans.__('Duration');
    case 'gpus':
      return trans.__('GPUs');
    case 'params':
      return trans.__('Parameters');
    case 'metric':
      return trans.__('Metric');
  }
}

export function ExperimentTable(props: ITableProps): JSX.Element {
  const { rows, columns, sort, now, trans } = props;
  const scroller = useRef<HTMLDivElement>(null);
  const [viewport, setViewport] = useState({ top: 0, height: 400 });
  useEffect(() => {
    const node = scroller.current;
    if (!node) {
      return;
    }
    const measure = () =>
      setViewport({ top: node.scrollTop, height: node.clientHeight });
    measure();
    const observer = new ResizeObserver(measure);
    observer.observe(node);
    return () => observer.disconnect();
  }, []);
  const grid = `${columns.map(c => WIDTHS[c]).join(' ')} 28px`;
  const minWidth = columns.reduce((sum, c) => sum + MIN_WIDTHS[c], 28);
  const visible = visibleWindow(
    rows.length,
    ROW_HEIGHT,
    viewport.top,
    viewport.height
  );
  const sortBy = (column: SortColumn) => props.onSort(toggleSort(sort, column));
  const gridKeys = useGrid(scroller, {
    rows: rows.length + 1,
    cols: columns.length + 1,
    scrollToRow: row => {
      const node = scroller.current;
      if (!node || row < 1) {
        return;
      }
      const top = (row - 1) * ROW_HEIGHT;
      const header = ROW_HEIGHT;
      if (top < node.scrollTop) {
        node.scrollTop = top;
      } else if (
        top + ROW_HEIGHT >
        node.scrollTop + node.clientHeight - header
      ) {
        node.scrollTop = top + ROW_HEIGHT - node.clientHeight + header;
      }
    }
  });
  return (
    <div
      className="jp-kubelab-Table"
      ref={scroller}
      role="grid"
      aria-label={trans.__('Experiments')}
      aria-rowcount={rows.length + 1}
      aria-colcount={columns.length + 1}
      onKeyDown={gridKeys.onKeyDown}
      onFocus={gridKeys.onFocus}
      onScroll={event =>
        setViewport({
          top: event.currentTarget.scrollTop,
          height: event.currentTarget.clientHeight
        })
      }
    >
      <div
        className="jp-kubelab-Table-header"
        role="row"
        aria-rowindex={1}
        style={{ gridTemplateColumns: grid, minWidth }}
      >
        {columns.map(column => (
          <SortHeader
            key={column}
            as="div"
            className="jp-kubelab-Table-headerCell"
            column={column}
            label={headerLabel(column, trans)}
            active={sort.column === column}
            descending={sort.descending}
            trans={trans}
            onSort={() => sortBy(column)}
          />
        ))}
        <div
          role="columnheader"
          tabIndex={-1}
          className="jp-kubelab-Table-headerCell jp-kubelab-Table-menuHeader"
        >
          <span className="jp-kubelab-VisuallyHidden">
            {trans.__('Actions')}
          </span>
        </div>
      </div>
      <div
        className="jp-kubelab-Table-body"
        style={{ height: visible.totalHeight, minWidth }}
      >
        {rows.slice(visible.start, visible.end).map((row, i) => (
          <ExperimentRow
            key={row.id}
            row={row}
            index={visible.start + i}
            columns={columns}
            grid={grid}
            now={now}
            trans={trans}
            onOpen={props.onOpen}
            onMenu={props.onMenu}
          />
        ))}
      </div>
    </div>
  );
}

function ExperimentRow(props: {
  row: IExperimentRecord;
  index: number;
  columns: readonly Column[];
  grid: string;
  now: number;
  trans: TranslationBundle;
  onOpen(id: string): void;
  onMenu(id: string, x: number, y: number): void;
}): JSX.Element {
  const { row, columns, trans } = props;
  return (
    <div
      className="jp-kubelab-Row"
      role="row"
      aria-rowindex={props.index + 2}
      data-experiment-id={row.id}
      style={{
        gridTemplateColumns: props.grid,
        top: props.index * ROW_HEIGHT,
        height: ROW_HEIGHT
      }}
      onClick={() => props.onOpen(row.id)}
    >
      {columns.map(column => (
        <Cell key={column} column={column} {...props} />
      ))}
      <div role="gridcell" tabIndex={-1} className="jp-kubelab-Row-menuCell">
        <button
          className="jp-kubelab-Row-menu jp-Button jp-mod-minimal"
          data-grid-focus=""
          tabIndex={-1}
          title={trans.__('Actions')}
          aria-label={trans.__('Actions for %1', row.name)}
          onClick={event => {
            event.stopPropagation();
            const box = event.currentTarget.getBoundingClientRect();
            props.onMenu(row.id, box.left, box.bottom);
          }}
        >
          ⋯
        </button>
      </div>
    </div>
  );
}

function Cell(props: {
  column: Column;
  row: IExperimentRecord;
  now: number;
  trans: TranslationBundle;
}): JSX.Element {
  const { column, row, now, trans } = props;
  switch (column) {
    case 'name':
      return (
        <div
          className="jp-kubelab-Row-name"
          role="gridcell"
          tabIndex={-1}
          title={`${row.name} (${row.id})`}
        >
          {row.name}
          {row.trial !== null && row.trial !== undefined ? (
            <span className="jp-kubelab-Row-trial"> #{row.trial}</span>
          ) : null}
        </div>
      );
    case 'status': {
      const reason =
        row.exit_code === null || row.exit_code === undefined
          ? row.reason
          : trans.__('%1 (exit code %2)', row.reason, row.exit_code);
      return (
        <div
          className="jp-kubelab-Row-status"
          role="gridcell"
          tabIndex={-1}
          data-status={row.status}
          title={reason}
        >
          <span
            className={`jp-kubelab-StatusDot jp-kubelab-StatusDot-${row.status.toLowerCase()}`}
          />
          {row.status}
        </div>
      );
    }
    case 'started':
      return (
        <div
          className="jp-kubelab-Row-started"
          role="gridcell"
          tabIndex={-1}
          title={row.started_at ? Time.format(row.started_at) : ''}
        >
          {row.started_at ? Time.formatHuman(row.started_at) : '—'}
        </div>
      );
    case 'duration':
      return (
        <div
          className="jp-kubelab-Row-duration jp-kubelab-Number"
          role="gridcell"
          tabIndex={-1}
        >
          {formatDuration(elapsedSeconds(row, now))}
        </div>
      );
    case 'gpus':
      return (
        <div
          className="jp-kubelab-Row-gpus jp-kubelab-Number"
          role="gridcell"
          tabIndex={-1}
        >
          {formatGpus(row)}
        </div>
      );
    case 'params': {
      const text = formatParams(row.params);
      return (
        <div
          className="jp-kubelab-Row-params"
          role="gridcell"
          tabIndex={-1}
          title={text}
        >
          {text || '—'}
        </div>
      );
    }
    case 'metric':
      return (
        <div
          className="jp-kubelab-Row-metric"
          role="gridcell"
          tabIndex={-1}
          title={trans.__('objective or latest metric')}
        >
          {formatLatestMetric(row)}
        </div>
      );
  }
}

/** The PQL box: applies after a pause in typing or on Enter; shows the server's complaint. */
export function QueryBox(props: {
  value: string;
  error: IQueryError | null;
  trans: TranslationBundle;
  onQuery(query: string): void;
}): JSX.Element {
  const { error, trans } = props;
  const [text, setText] = useState(props.value);
  // The sidebar re-renders on every event, each time with a new `onQuery`: the debouncer
  // must outlive those renders, or runs arriving faster than the pause cancel the query.
  const onQuery = useRef(props.onQuery);
  onQuery.current = props.onQuery;
  const debouncer = useMemo(
    () =>
      new Debouncer<string>(
        value => onQuery.current(value.trim()),
        QUERY_DEBOUNCE_MS
      ),
    []
  );
  useEffect(() => () => debouncer.cancel(), [debouncer]);
  const marked = error ? markError(text, error.index) : null;
  return (
    <div className="jp-kubelab-Query">
      <input
        className="jp-kubelab-Query-input jp-mod-styled"
        type="search"
        placeholder={trans.__('Filter with PQL, e.g. status:running')}
        aria-label={trans.__('Filter experiments (PQL)')}
        aria-invalid={error !== null}
        value={text}
        spellCheck={false}
        onChange={event => {
          setText(event.target.value);
          debouncer.schedule(event.target.value);
        }}
        onKeyDown={event => {
          if (event.key === 'Enter') {
            debouncer.schedule(text);
            debouncer.flush();
          }
        }}
      />
      {error && marked ? (
        <div className="jp-kubelab-Query-error" role="alert">
          {marked.at ? (
            <code className="jp-kubelab-Query-echo">
              {marked.before}
              <mark>{marked.at}</mark>
              {marked.after}
            </code>
          ) : null}
          <span className="jp-kubelab-Query-message">{error.message}</span>
        </div>
      ) : null}
    </div>
  );
}

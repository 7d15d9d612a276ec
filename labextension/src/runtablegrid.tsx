/**
 * The Compare view's run table: a search box, sortable headers (every column; names in
 * natural order), ticked runs pinned on top, and only the rows in sight drawn, so it
 * opens and ticks as fast with 10,000 runs as with 100. While the pointer is over the
 * table no row moves: runs that arrive meanwhile wait, counted, until it leaves.
 */
import { TranslationBundle } from '@jupyterlab/translation';
import React, { useMemo, useRef, useState } from 'react';

import { formatValue, IExperimentRecord } from './model';
import { IRunSort, RunColumn, RunRow, runRows } from './runtable';
import { formatSystem, systemLabel, SystemKey, systemValue } from './system';
import { SortHeader } from './sortheader';
import { useGrid } from './usegrid';
import { visibleWindow } from './virtual';

export const RUN_ROW_HEIGHT = 26;
const TABLE_HEIGHT = 420;

export interface IRunTableProps {
  records: readonly IExperimentRecord[];
  selected: string[];
  collapsed: string[];
  metrics: string[];
  params: string[];
  /** The `system` sums shown as columns (those some run measured). */
  system: SystemKey[];
  colourOf(id: string): string;
  sweepName(id: string): string;
  onTick(ids: string[], on: boolean): void;
  onCollapse(sweep: string): void;
  onOpen(id: string): void;
  trans: TranslationBundle;
}

export function RunTable(props: IRunTableProps): JSX.Element {
  const { records, selected, metrics, params, system, trans } = props;
  const [search, setSearch] = useState('');
  const [selectedOnly, setSelectedOnly] = useState(false);
  const [sort, setSort] = useState<IRunSort | null>(null);
  // While the pointer is over the table: the runs and the pinned ones as they were.
  const [frozen, setFrozen] = useState<{
    ids: ReadonlySet<string>;
    pinned: readonly string[];
  } | null>(null);
  const [top, setTop] = useState(0);
  const rows = useMemo(
    () =>
      runRows(records, {
        pinned: frozen?.pinned ?? selected,
        collapsed: props.collapsed,
        search,
        sort,
        frozen: frozen?.ids ?? null,
        selectedOnly
      }),
    [records, selected, props.collapsed, search, sort, frozen, selectedOnly]
  );
  const waiting = frozen
    ? records.filter(r => !frozen.ids.has(r.id)).length
    : 0;
  const width = 3 + metrics.length + system.length + params.length;
  const scroller = useRef<HTMLDivElement>(null);
  const table = useRef<HTMLTableElement>(null);
  const keys = useGrid(table, {
    rows: rows.length + 1,
    cols: width,
    scrollToRow: row => {
      const node = scroller.current;
      if (!node || row < 1) {
        return;
      }
      const y = (row - 1) * RUN_ROW_HEIGHT;
      if (y < node.scrollTop) {
        node.scrollTop = y;
      } else if (y + 2 * RUN_ROW_HEIGHT > node.scrollTop + node.clientHeight) {
        node.scrollTop = y + 2 * RUN_ROW_HEIGHT - node.clientHeight;
      }
    }
  });
  const shown = visibleWindow(rows.length, RUN_ROW_HEIGHT, top, TABLE_HEIGHT);
  const sortBy = (column: RunColumn) =>
    setSort(current =>
      current?.column === column
        ? current.descending
          ? null // a third click goes back to the order runs came in
          : { column, descending: true }
        : { column, descending: false }
    );
  const header = (column: RunColumn, label: string, className = '') => (
    <SortHeader
      key={column}
      button="jp-kubelab-RunTable-sort"
      className={className}
      column={column}
      label={label}
      active={sort?.column === column}
      descending={sort?.descending ?? false}
      trans={trans}
      onSort={() => sortBy(column)}
    />
  );
  return (
    <div className="jp-kubelab-RunTable-box">
      <div className="jp-kubelab-RunTable-tools">
        <input
          className="jp-mod-styled jp-kubelab-RunTable-search"
          type="search"
          placeholder={trans.__(
            'Search runs: name, id, #trial, status, parameters'
          )}
          aria-label={trans.__('Search runs')}
          value={search}
          onChange={event => setSearch(event.target.value)}
        />
        <label className="jp-kubelab-RunTable-selectedOnly">
          <input
            type="checkbox"
            checked={selectedOnly}
            onChange={event => setSelectedOnly(event.target.checked)}
          />
          {trans.__('Selected only')}
        </label>
        <span className="jp-kubelab-RunTable-count">
          {trans.__('%1 rows', rows.length)}
          {waiting
            ? ` · ${trans.__('%1 new (shown when the pointer leaves)', waiting)}`
            : ''}
        </span>
      </div>
      <div
        className="jp-kubelab-RunTable-scroll"
        ref={scroller}
        style={{ maxHeight: TABLE_HEIGHT }}
        onScroll={event => setTop(event.currentTarget.scrollTop)}
        onPointerEnter={() =>
          setFrozen({ ids: new Set(records.map(r => r.id)), pinned: selected })
        }
        onPointerLeave={() => setFrozen(null)}
      >
        <table
          className="jp-kubelab-RunTable"
          role="grid"
          ref={table}
          aria-label={trans.__('Runs')}
          aria-rowcount={rows.length + 1}
          onKeyDown={keys.onKeyDown}
          onFocus={keys.onFocus}
        >
          <thead>
            <tr role="row" aria-rowindex={1}>
              <th
                scope="col"
                role="columnheader"
                tabIndex={-1}
                className="jp-kubelab-RunTable-pick"
              >
                <span className="jp-kubelab-VisuallyHidden">
                  {trans.__('Compare')}
                </span>
              </th>
              {header('name', trans.__('Name'), 'jp-kubelab-RunTable-name')}
              {header('status', trans.__('Status'))}
              {metrics.map(m => header(`metric:${m}`, m))}
              {system.map(key =>
                header(`system:${key}`, systemLabel(key, trans))
              )}
              {params.map(p => header(`param:${p}`, p))}
            </tr>
          </thead>
          <tbody>
            {shown.start > 0 ? (
              <tr aria-hidden="true" style={{ height: shown.offsetTop }} />
            ) : null}
            {rows.slice(shown.start, shown.end).map((row, i) => (
              <Row
                key={row.kind === 'run' ? row.record.id : `sweep:${row.sweep}`}
                {...props}
                row={row}
                index={shown.start + i + 2}
                width={width}
              />
            ))}
            {shown.end < rows.length ? (
              <tr
                aria-hidden="true"
                style={{
                  height: (rows.length - shown.end) * RUN_ROW_HEIGHT
                }}
              />
            ) : null}
          </tbody>
        </table>
      </div>
    </div>
  );
}

function Row(
  props: IRunTableProps & { row: RunRow; index: number; width: number }
): JSX.Element {
  const { row, selected, trans } = props;
  if (row.kind === 'group') {
    const all =
      row.ids.length > 0 && row.ids.every(id => selected.includes(id));
    return (
      <tr
        role="row"
        aria-rowindex={props.index}
        className="jp-kubelab-RunTable-group"
        data-sweep-id={row.sweep}
        style={{ height: RUN_ROW_HEIGHT }}
      >
        <td role="gridcell" tabIndex={-1} className="jp-kubelab-RunTable-pick">
          <input
            type="checkbox"
            data-grid-focus=""
            tabIndex={-1}
            checked={all}
            aria-label={trans.__(
              'Compare every trial of %1',
              props.sweepName(row.sweep)
            )}
            onChange={e => props.onTick(row.ids, e.target.checked)}
          />
        </td>
        <th
          scope="rowgroup"
          role="rowheader"
          tabIndex={-1}
          colSpan={props.width - 1}
          className="jp-kubelab-RunTable-name"
        >
          <button
            className="jp-Button jp-mod-minimal jp-kubelab-RunTable-toggle"
            data-grid-focus=""
            tabIndex={-1}
            aria-expanded={row.expanded}
            onClick={() => props.onCollapse(row.sweep)}
          >
            {row.expanded ? '▾' : '▸'}{' '}
            {trans.__(
              'Sweep %1 (%2 trials)',
              props.sweepName(row.sweep),
              row.ids.length
            )}
          </button>
        </th>
      </tr>
    );
  }
  const record = row.record;
  const on = selected.includes(record.id);
  const name =
    record.trial !== null ? `#${record.trial} ${record.name}` : record.name;
  return (
    <tr
      role="row"
      aria-rowindex={props.index}
      className={`jp-kubelab-RunTable-row${row.pinned ? ' jp-mod-pinned' : ''}`}
      data-experiment-id={record.id}
      data-sweep-id={record.sweep ?? undefined}
      aria-selected={on}
      style={{ height: RUN_ROW_HEIGHT }}
    >
      <td role="gridcell" tabIndex={-1} className="jp-kubelab-RunTable-pick">
        <input
          type="checkbox"
          data-grid-focus=""
          tabIndex={-1}
          checked={on}
          aria-label={trans.__('Compare %1', name)}
          onChange={e => props.onTick([record.id], e.target.checked)}
        />
      </td>
      <th
        scope="row"
        role="rowheader"
        tabIndex={-1}
        className="jp-kubelab-RunTable-name"
      >
        {on ? (
          <span
            className="jp-kubelab-RunTable-swatch"
            style={{ background: props.colourOf(record.id) }}
          />
        ) : null}
        <button
          className="jp-kubelab-Link"
          data-grid-focus=""
          tabIndex={-1}
          onClick={() => props.onOpen(record.id)}
        >
          {name}
        </button>
      </th>
      <td role="gridcell" tabIndex={-1} data-status={record.status}>
        {record.status}
      </td>
      {props.metrics.map(m => (
        <td
          role="gridcell"
          tabIndex={-1}
          key={`m:${m}`}
          className="jp-kubelab-RunTable-number"
        >
          {formatValue(record.metrics?.[m])}
        </td>
      ))}
      {props.system.map(key => (
        <td
          role="gridcell"
          tabIndex={-1}
          key={`s:${key}`}
          className="jp-kubelab-RunTable-number"
          data-system={key}
        >
          {formatSystem(key, systemValue(record, key))}
        </td>
      ))}
      {props.params.map(p => (
        <td role="gridcell" tabIndex={-1} key={`p:${p}`}>
          {formatValue(record.params?.[p])}
        </td>
      ))}
    </tr>
  );
}

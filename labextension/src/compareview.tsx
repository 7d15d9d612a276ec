/**
 * "Compare runs" in the main area: a run table (a column per chosen metric and parameter,
 * the name pinned, widths adjustable, sweep trials grouped under their sweep) where ticked
 * runs get their curves overlaid, one chart per metric, with smoothing, log scale and a
 * step / relative-time / wall-time axis. Final-only metrics are shown as values.
 */
import { TranslationBundle } from '@jupyterlab/translation';
import { ReactWidget } from '@jupyterlab/ui-components';
import { CommandRegistry } from '@lumino/commands';
import React, { useEffect, useMemo, useRef, useState } from 'react';

import { IMetricPoint, KubelabApi } from './api';
import {
  ChartControls,
  DEFAULT_CHART_SETTINGS,
  IChartSettings
} from './chartcontrols';
import { assignSlots, columnKeys, groupBySweep, runStyle } from './compare';
import { formatValue, IExperimentRecord } from './model';
import { MetricCharts } from './metriccharts';
import { CommandIDs } from './panel';
import { IMetricsEvent, LiveStore } from './store';
import { useGrid } from './usegrid';

export interface ICompareViewOptions {
  store: LiveStore;
  api: KubelabApi;
  commands: CommandRegistry;
  trans: TranslationBundle;
  /** The runs ticked when the view opens (a sweep's trials, or a selection). */
  ids: readonly string[];
  /** Told the ticked runs whenever they change (for the layout restorer and links). */
  onSelection?(ids: readonly string[]): void;
}

export class CompareView extends ReactWidget {
  constructor(readonly options: ICompareViewOptions) {
    super();
    this.addClass('jp-kubelab-CompareView');
  }

  protected render(): JSX.Element {
    return <Compare {...this.options} />;
  }
}

/** Re-render when the store changes (new runs, new statuses, new latest metrics). */
function useStoreVersion(store: LiveStore): number {
  const [version, setVersion] = useState(0);
  useEffect(() => {
    const bump = () => setVersion(v => v + 1);
    store.changed.connect(bump);
    return () => {
      store.changed.disconnect(bump);
    };
  }, [store]);
  return version;
}

function Compare(props: ICompareViewOptions): JSX.Element {
  const { store, api, commands, trans } = props;
  useStoreVersion(store);
  const [selected, setSelected] = useState<string[]>([...props.ids]);
  const { onSelection } = props;
  useEffect(() => onSelection?.(selected), [selected, onSelection]);
  const [points, setPoints] = useState<Record<string, IMetricPoint[]>>({});
  const [chart, setChart] = useState<IChartSettings>(DEFAULT_CHART_SETTINGS);
  const [hiddenColumns, setHiddenColumns] = useState<string[]>([]);
  const [collapsed, setCollapsed] = useState<string[]>([]);
  const [error, setError] = useState('');

  // Each ticked run's points once, then its live `metrics` events.
  useEffect(() => {
    let disposed = false;
    for (const id of selected) {
      if (!(id in points)) {
        api.metrics(id).then(
          loaded =>
            !disposed &&
            setPoints(current =>
              id in current ? current : { ...current, [id]: loaded }
            ),
          reason => !disposed && setError(String(reason?.message ?? reason))
        );
      }
    }
    return () => {
      disposed = true;
    };
  }, [selected]);
  useEffect(() => {
    const onMetrics = (_: LiveStore, event: IMetricsEvent) =>
      setPoints(current =>
        event.id in current
          ? { ...current, [event.id]: [...current[event.id], ...event.points] }
          : current
      );
    store.metrics.connect(onMetrics);
    return () => {
      store.metrics.disconnect(onMetrics);
    };
  }, [store]);

  const records = store.table.rows;
  const byId = new Map(records.map(r => [r.id, r]));
  const chosen = selected.filter(id => byId.has(id) || id in points);
  const label = (id: string) => {
    const record = byId.get(id);
    if (!record) {
      return id;
    }
    return record.trial !== null
      ? `${record.name} #${record.trial}`
      : record.name;
  };
  // A run keeps its colour while ticked, whatever is ticked or unticked around it.
  const slots = useRef<Record<string, number>>({});
  slots.current = useMemo(
    () => assignSlots(slots.current, selected),
    [selected]
  );
  const styleOf = (id: string) => runStyle(slots.current[id] ?? 0);
  const colourOf = (id: string) => styleOf(id).colour;
  const loaded = chosen.filter(id => id in points);
  const keys = columnKeys(records);
  const shown = (kind: 'metric' | 'param', name: string) =>
    !hiddenColumns.includes(`${kind}:${name}`);
  const toggleColumn = (key: string) =>
    setHiddenColumns(current =>
      current.includes(key) ? current.filter(k => k !== key) : [...current, key]
    );
  const tick = (ids: string[], on: boolean) =>
    setSelected(current =>
      on
        ? [...current, ...ids.filter(id => !current.includes(id))]
        : current.filter(id => !ids.includes(id))
    );
  return (
    <div className="jp-kubelab-Detail jp-kubelab-Compare">
      <header className="jp-kubelab-Detail-header">
        <h1>{trans.__('Compare runs')}</h1>
        <span className="jp-kubelab-Detail-reason" data-compare-count="">
          {trans.__('%1 runs compared', chosen.length)}
        </span>
      </header>
      {error ? <p className="jp-kubelab-Error">{error}</p> : null}
      <ChartControls settings={chart} trans={trans} onChange={setChart} />
      {chosen.length === 0 ? (
        <p className="jp-kubelab-Sidebar-empty">
          {trans.__('Tick runs in the table below to overlay their curves.')}
        </p>
      ) : null}
      <MetricCharts
        runs={loaded.map(id => ({
          id,
          label: label(id),
          ...styleOf(id),
          points: points[id]
        }))}
        settings={chart}
        trans={trans}
      />
      <details className="jp-kubelab-Compare-columns">
        <summary>{trans.__('Columns')}</summary>
        <fieldset>
          <legend>{trans.__('Metrics')}</legend>
          {keys.metrics.map(name => (
            <label key={name}>
              <input
                type="checkbox"
                checked={shown('metric', name)}
                onChange={() => toggleColumn(`metric:${name}`)}
              />
              {name}
            </label>
          ))}
        </fieldset>
        <fieldset>
          <legend>{trans.__('Parameters')}</legend>
          {keys.params.map(name => (
            <label key={name}>
              <input
                type="checkbox"
                checked={shown('param', name)}
                onChange={() => toggleColumn(`param:${name}`)}
              />
              {name}
            </label>
          ))}
        </fieldset>
      </details>
      <RunTable
        records={records}
        selected={selected}
        collapsed={collapsed}
        metrics={keys.metrics.filter(n => shown('metric', n))}
        params={keys.params.filter(n => shown('param', n))}
        colourOf={colourOf}
        sweepName={id => store.sweeps.find(s => s.id === id)?.name ?? id}
        onTick={tick}
        onCollapse={sweep =>
          setCollapsed(current =>
            current.includes(sweep)
              ? current.filter(s => s !== sweep)
              : [...current, sweep]
          )
        }
        onOpen={id => void commands.execute(CommandIDs.openExperiment, { id })}
        trans={trans}
      />
    </div>
  );
}

function RunTable(props: {
  records: readonly IExperimentRecord[];
  selected: string[];
  collapsed: string[];
  metrics: string[];
  params: string[];
  colourOf(id: string): string;
  sweepName(id: string): string;
  onTick(ids: string[], on: boolean): void;
  onCollapse(sweep: string): void;
  onOpen(id: string): void;
  trans: TranslationBundle;
}): JSX.Element {
  const { records, selected, metrics, params, trans } = props;
  const groups = groupBySweep(records);
  const width = 3 + metrics.length + params.length;
  const open = (sweep: string) => !props.collapsed.includes(sweep);
  const rowCount = groups.reduce(
    (n, g) =>
      n +
      (g.sweep === null
        ? g.runs.length
        : 1 + (open(g.sweep) ? g.runs.length : 0)),
    1
  );
  const table = useRef<HTMLTableElement>(null);
  const keys = useGrid(table, { rows: rowCount, cols: width });
  let rowIndex = 1; // the header row; each row drawn takes the next
  const row = (record: IExperimentRecord) => {
    const on = selected.includes(record.id);
    const name =
      record.trial !== null ? `#${record.trial} ${record.name}` : record.name;
    rowIndex += 1;
    return (
      <tr
        key={record.id}
        role="row"
        aria-rowindex={rowIndex}
        className="jp-kubelab-RunTable-row"
        data-experiment-id={record.id}
        aria-selected={on}
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
        {metrics.map(m => (
          <td
            role="gridcell"
            tabIndex={-1}
            key={`m:${m}`}
            className="jp-kubelab-RunTable-number"
          >
            {formatValue(record.metrics?.[m])}
          </td>
        ))}
        {params.map(p => (
          <td role="gridcell" tabIndex={-1} key={`p:${p}`}>
            {formatValue(record.params?.[p])}
          </td>
        ))}
      </tr>
    );
  };
  return (
    <div className="jp-kubelab-RunTable-scroll">
      <table
        className="jp-kubelab-RunTable"
        role="grid"
        ref={table}
        aria-label={trans.__('Runs')}
        aria-rowcount={rowCount}
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
            <th
              scope="col"
              role="columnheader"
              tabIndex={-1}
              className="jp-kubelab-RunTable-name"
            >
              {trans.__('Name')}
            </th>
            <th scope="col" role="columnheader" tabIndex={-1}>
              {trans.__('Status')}
            </th>
            {metrics.map(m => (
              <th
                key={`m:${m}`}
                scope="col"
                role="columnheader"
                tabIndex={-1}
                data-column={`metric:${m}`}
              >
                {m}
              </th>
            ))}
            {params.map(p => (
              <th
                key={`p:${p}`}
                scope="col"
                role="columnheader"
                tabIndex={-1}
                data-column={`param:${p}`}
              >
                {p}
              </th>
            ))}
          </tr>
        </thead>
        {groups.map(group => {
          if (group.sweep === null) {
            return <tbody key="runs">{group.runs.map(row)}</tbody>;
          }
          const sweep = group.sweep;
          const ids = group.runs.map(r => r.id);
          const all = ids.every(id => selected.includes(id));
          const expanded = open(sweep);
          rowIndex += 1;
          return (
            <tbody key={sweep} data-sweep-id={sweep}>
              <tr
                role="row"
                aria-rowindex={rowIndex}
                className="jp-kubelab-RunTable-group"
              >
                <td
                  role="gridcell"
                  tabIndex={-1}
                  className="jp-kubelab-RunTable-pick"
                >
                  <input
                    type="checkbox"
                    data-grid-focus=""
                    tabIndex={-1}
                    checked={all}
                    aria-label={trans.__(
                      'Compare every trial of %1',
                      props.sweepName(sweep)
                    )}
                    onChange={e => props.onTick(ids, e.target.checked)}
                  />
                </td>
                <th
                  scope="rowgroup"
                  role="rowheader"
                  tabIndex={-1}
                  colSpan={width - 1}
                  className="jp-kubelab-RunTable-name"
                >
                  <button
                    className="jp-Button jp-mod-minimal jp-kubelab-RunTable-toggle"
                    data-grid-focus=""
                    tabIndex={-1}
                    aria-expanded={expanded}
                    onClick={() => props.onCollapse(sweep)}
                  >
                    {expanded ? '▾' : '▸'}{' '}
                    {trans.__(
                      'Sweep %1 (%2 trials)',
                      props.sweepName(sweep),
                      ids.length
                    )}
                  </button>
                </th>
              </tr>
              {expanded ? group.runs.map(row) : null}
            </tbody>
          );
        })}
      </table>
    </div>
  );
}

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
import { assignSlots, columnKeys, runStyle } from './compare';
import { GroupBy, groupRuns, NO_SWEEP } from './curvegroups';
import { MetricCharts } from './metriccharts';
import { mergePoints } from './metricpoints';
import { CommandIDs } from './panel';
import { IMetricsEvent, LiveStore } from './store';
import { RunTable } from './runtablegrid';
import { measuredColumns, systemLabel } from './system';

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
  const [groupBy, setGroupBy] = useState<GroupBy>('none');

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
          ? {
              ...current,
              [event.id]: mergePoints(current[event.id], event.points)
            }
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
  const system = measuredColumns(records);
  const shown = (kind: 'metric' | 'param' | 'system', name: string) =>
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
        <button
          className="jp-Button jp-mod-styled"
          disabled={chosen.length !== 2}
          title={trans.__('Tick exactly two runs to diff them')}
          onClick={() =>
            void commands.execute(CommandIDs.diff, {
              a: chosen[0],
              b: chosen[1]
            })
          }
        >
          {trans.__('Diff')}
        </button>
      </header>
      {error ? <p className="jp-kubelab-Error">{error}</p> : null}
      <ChartControls settings={chart} trans={trans} onChange={setChart} />
      {chosen.length === 0 ? (
        <p className="jp-kubelab-Sidebar-empty">
          {trans.__('Tick runs in the table below to overlay their curves.')}
        </p>
      ) : null}
      <label className="jp-kubelab-Compare-groupBy">
        {trans.__('Group by')}{' '}
        <select
          name="groupBy"
          value={groupBy}
          onChange={event => setGroupBy(event.target.value)}
        >
          <option value="none">{trans.__('nothing (each run)')}</option>
          <option value="sweep">{trans.__('sweep')}</option>
          <option value="tag">{trans.__('tag')}</option>
          {keys.params.map(name => (
            <option key={name} value={`param:${name}`}>
              {name}
            </option>
          ))}
        </select>
      </label>
      <MetricCharts
        groups={
          groupBy === 'none'
            ? undefined
            : groupRuns(loaded, id => byId.get(id), groupBy).map(
                (group, i) => ({
                  label:
                    groupBy === 'sweep' && group.key !== NO_SWEEP
                      ? (store.sweeps.find(s => s.id === group.key)?.name ??
                        group.key)
                      : group.key,
                  colour: runStyle(i).colour,
                  ids: group.ids
                })
              )
        }
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
        {system.length ? (
          <fieldset>
            <legend>{trans.__('System')}</legend>
            {system.map(key => (
              <label key={key}>
                <input
                  type="checkbox"
                  checked={shown('system', key)}
                  onChange={() => toggleColumn(`system:${key}`)}
                />
                {systemLabel(key, trans)}
              </label>
            ))}
          </fieldset>
        ) : null}
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
        system={system.filter(key => shown('system', key))}
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

/**
 * Metric charts for one or many runs, the same everywhere (experiment view, sweep view,
 * compare view): one uPlot chart per metric that some run reported at least twice, and
 * the rest (`report_final`, single values) as numbers in a "Final values" table.
 */
import { TranslationBundle } from '@jupyterlab/translation';
import React, { useMemo, useState } from 'react';

import { IMetricPoint } from './api';
import { axisLabel, IChartSettings } from './chartcontrols';
import {
  align,
  chartableMetrics,
  curve,
  finalValues,
  forLogScale,
  smooth
} from './compare';
import { band } from './curvegroups';
import { formatNumber, formatValue } from './model';
import { OverlayChart } from './overlaychart';

/** A run as the charts draw it. */
export interface IChartRun {
  id: string;
  label: string;
  colour: string;
  points: readonly IMetricPoint[];
  /** Drawn dashed (a trial the sweep stopped early). */
  dashed?: boolean;
  /** Its own dash pattern (a run past the palette's twenty colours). */
  dash?: number[];
}

/** Runs drawn as one line: their mean, with a band from their min to their max. */
export interface IChartGroup {
  label: string;
  colour: string;
  ids: readonly string[];
}

const DASH = [5, 4];

/** A run's value for a metric shown as a number: its final value, else its last one. */
export function shownValue(
  points: readonly IMetricPoint[],
  metric: string
): number | undefined {
  const final = finalValues(points)[metric];
  if (final !== undefined) {
    return final;
  }
  for (let i = points.length - 1; i >= 0; i--) {
    if (metric in points[i].metrics) {
      return points[i].metrics[metric];
    }
  }
  return undefined;
}

let chartGroups = 0;

export function MetricCharts(props: {
  runs: readonly IChartRun[];
  settings: IChartSettings;
  trans: TranslationBundle;
  /** What `report_final(value)` measured (a sweep's objective), shown for `default`. */
  finalName?: string;
  /** Draw these groups (mean and min–max band) instead of each run's curve. */
  groups?: readonly IChartGroup[];
}): JSX.Element {
  const { runs, settings, trans } = props;
  const { charts, values } = chartableMetrics(runs.map(r => r.points));
  // One cursor for this group of charts, apart from any other view's.
  const [syncKey] = useState(() => `kubelab-charts-${++chartGroups}`);
  const single = runs.length === 1;
  return (
    <>
      <div className="jp-kubelab-Charts">
        {charts.map(metric =>
          props.groups ? (
            <GroupOverlay
              key={metric}
              metric={metric}
              runs={runs}
              groups={props.groups}
              settings={settings}
              trans={trans}
              syncKey={syncKey}
            />
          ) : (
            <MetricOverlay
              key={metric}
              metric={metric}
              runs={runs}
              settings={settings}
              trans={trans}
              syncKey={syncKey}
            />
          )
        )}
      </div>
      {values.length && runs.length ? (
        <table className="jp-kubelab-FinalValues">
          <caption>{trans.__('Final values')}</caption>
          <thead>
            <tr>
              <th scope="col">{trans.__('Metric')}</th>
              {single ? (
                <th scope="col">{trans.__('Value')}</th>
              ) : (
                runs.map(run => (
                  <th key={run.id} scope="col">
                    {run.label}
                  </th>
                ))
              )}
            </tr>
          </thead>
          <tbody>
            {values.map(metric => (
              <tr key={metric} data-metric={metric}>
                <th scope="row">
                  {metric === 'default' && props.finalName
                    ? props.finalName
                    : metric}
                </th>
                {runs.map(run => (
                  <td key={run.id} className="jp-kubelab-FinalValues-value">
                    {formatValue(shownValue(run.points, metric))}
                  </td>
                ))}
              </tr>
            ))}
          </tbody>
        </table>
      ) : null}
    </>
  );
}

function MetricOverlay(props: {
  metric: string;
  runs: readonly IChartRun[];
  settings: IChartSettings;
  trans: TranslationBundle;
  syncKey: string;
}): JSX.Element | null {
  const { metric, runs, trans } = props;
  const { axis, smoothing, log } = props.settings;
  const curves = runs.map(run => curve(run.points, metric, axis));
  const withData = runs.filter((_, i) => curves[i].x.length > 0);
  const key = withData.map(r => `${r.id}:${r.points.length}`).join(',');
  const data = useMemo(() => {
    const shown = curves
      .filter(c => c.x.length > 0)
      .map(c => ({ x: c.x, y: smooth(c.y, smoothing) }));
    const [xs, ...ys] = align(shown);
    return [xs, ...(log ? ys.map(forLogScale) : ys)] as [
      number[],
      ...(number | null)[][]
    ];
  }, [key, axis, smoothing, log]);
  const labels = withData
    .map(r => `${r.label}|${r.colour}|${r.dashed ?? false}|${r.dash ?? ''}`)
    .join(',');
  const series = useMemo(
    () =>
      withData.map(run => ({
        label: run.label,
        colour: run.colour,
        dash: run.dashed ? DASH : run.dash
      })),
    [labels]
  );
  if (!withData.length) {
    return null;
  }
  const only = withData.length === 1 ? curves.find(c => c.x.length) : null;
  const latest =
    only && axis === 'step'
      ? `${formatNumber(only.y[only.y.length - 1])} @${only.x[only.x.length - 1]}`
      : undefined;
  return (
    <OverlayChart
      metric={metric}
      data={data}
      series={series}
      wallTime={axis === 'wall'}
      log={log}
      xLabel={axisLabel(axis, trans)}
      latest={latest}
      trans={trans}
      syncKey={props.syncKey}
    />
  );
}

/** One metric's groups: per group its mean, then its min and max with the band between. */
function GroupOverlay(props: {
  metric: string;
  runs: readonly IChartRun[];
  groups: readonly IChartGroup[];
  settings: IChartSettings;
  trans: TranslationBundle;
  syncKey: string;
}): JSX.Element | null {
  const { metric, runs, groups, trans } = props;
  const { axis, smoothing, log } = props.settings;
  const byId = new Map(runs.map(run => [run.id, run]));
  const folded = groups
    .map(group => ({
      group,
      band: band(
        group.ids
          .map(id => byId.get(id))
          .filter((run): run is IChartRun => run !== undefined)
          .map(run => curve(run.points, metric, axis))
          .filter(c => c.x.length > 0)
          .map(c => ({ x: c.x, y: smooth(c.y, smoothing) }))
      )
    }))
    .filter(f => f.band.x.length > 0);
  const key = `${folded.map(f => `${f.group.label}|${f.group.colour}|${f.group.ids.map(id => byId.get(id)?.points.length).join('.')}`)}`;
  const chart = useMemo(() => {
    const curves = folded.flatMap(({ band: b }) => [
      { x: b.x, y: b.mean },
      { x: b.x, y: b.min },
      { x: b.x, y: b.max }
    ]);
    const [xs, ...ys] = align(curves);
    const data = [xs, ...(log ? ys.map(forLogScale) : ys)] as [
      number[],
      ...(number | null)[][]
    ];
    const series = folded.flatMap(({ group }) => [
      {
        label: trans.__('%1 mean (%2 runs)', group.label, group.ids.length),
        colour: group.colour
      },
      {
        label: trans.__('%1 min', group.label),
        colour: group.colour,
        faint: true
      },
      {
        label: trans.__('%1 max', group.label),
        colour: group.colour,
        faint: true
      }
    ]);
    const bands = folded.map(
      (_, i) => [3 * i + 2, 3 * i + 1] as [number, number]
    );
    return { data, series, bands };
  }, [key, axis, smoothing, log]);
  if (!folded.length) {
    return null;
  }
  return (
    <OverlayChart
      metric={metric}
      data={chart.data}
      series={chart.series}
      bands={chart.bands}
      wallTime={axis === 'wall'}
      log={log}
      xLabel={axisLabel(axis, trans)}
      trans={trans}
      syncKey={props.syncKey}
    />
  );
}

/**
 * The System section of the experiment view: the run's GPU utilisation, GPU memory and power
 * over time (one line per GPU, drawn by the same chart as the metrics), its sums in one line,
 * and, instead of numbers, why a source was not measured. Re-read every few seconds while the
 * run is live (the server decodes only the lines appended since); once more when it ends.
 */
import { TranslationBundle } from '@jupyterlab/translation';
import React, { useEffect, useMemo, useState } from 'react';

import { KubelabApi } from './api';
import { runColour } from './compare';
import { OverlayChart } from './overlaychart';
import {
  chartTitle,
  gpuChart,
  ISystemRead,
  summaryLine,
  SYSTEM_CHARTS
} from './system';

const REREAD_MS = 10_000;

export function SystemSection(props: {
  api: KubelabApi;
  id: string;
  live: boolean;
  trans: TranslationBundle;
}): JSX.Element {
  const { api, id, live, trans } = props;
  const [read, setRead] = useState<ISystemRead | null>(null);
  const [error, setError] = useState('');
  useEffect(() => {
    let disposed = false;
    const load = () =>
      api.system(id).then(
        value => !disposed && (setRead(value), setError('')),
        reason => !disposed && setError(String(reason?.message ?? reason))
      );
    void load(); // also the last read when `live` turns false
    const timer = live ? window.setInterval(load, REREAD_MS) : undefined;
    return () => {
      disposed = true;
      window.clearInterval(timer);
    };
  }, [id, live]);
  const charts = useMemo(
    () =>
      read
        ? SYSTEM_CHARTS.map(field => ({
            field,
            title: chartTitle(field, trans),
            ...gpuChart(read, field)
          }))
        : [],
    [read]
  );
  if (!read) {
    return error ? (
      <p className="jp-kubelab-Error">{error}</p>
    ) : (
      <p>{trans.__('Loading…')}</p>
    );
  }
  const line = summaryLine(read.summary);
  const missing = Object.entries(read.summary.missing ?? {});
  const drawn = charts.filter(chart => chart.labels.length > 0);
  return (
    <div className="jp-kubelab-System">
      {line ? <p className="jp-kubelab-System-summary">{line}</p> : null}
      {read.summary.notice ? (
        <p className="jp-kubelab-System-notice" role="status">
          {read.summary.notice}
        </p>
      ) : null}
      {missing.map(([source, why]) => (
        <p key={source} className="jp-kubelab-System-missing">
          {trans.__('No %1 metrics: %2', source, why)}
        </p>
      ))}
      {!line && !missing.length ? (
        <p className="jp-kubelab-Sidebar-empty">
          {trans.__('No system samples.')}
        </p>
      ) : null}
      {error ? <p className="jp-kubelab-Error">{error}</p> : null}
      <div className="jp-kubelab-Charts">
        {drawn.map(chart => (
          <SystemChart key={chart.field} chart={chart} trans={trans} />
        ))}
      </div>
    </div>
  );
}

function SystemChart(props: {
  chart: ReturnType<typeof gpuChart> & { field: string; title: string };
  trans: TranslationBundle;
}): JSX.Element {
  const { chart, trans } = props;
  const series = useMemo(
    () => chart.labels.map((label, i) => ({ label, colour: runColour(i) })),
    [chart.labels.join(',')]
  );
  return (
    <OverlayChart
      metric={`system/${chart.field}`}
      title={chart.title}
      data={chart.data}
      series={series}
      wallTime={true}
      log={false}
      xLabel={trans.__('Time')}
      trans={trans}
    />
  );
}

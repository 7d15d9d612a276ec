/**
 * The experiment view in the main area: parameters, a live chart per metric, streamed
 * logs per replica, the status timeline with reasons, Kubernetes events and output
 * files. Metrics arrive through the shared event stream (`metrics` events); the record
 * is re-read only when the run changes state.
 */
import { Time } from '@jupyterlab/coreutils';
import { TranslationBundle } from '@jupyterlab/translation';
import { ReactWidget } from '@jupyterlab/ui-components';
import { CommandRegistry } from '@lumino/commands';
import React, { useEffect, useRef, useState } from 'react';

import {
  IExperimentDetail,
  IMetricPoint,
  IOutputFile,
  KubelabApi
} from './api';
import {
  ChartControls,
  DEFAULT_CHART_SETTINGS,
  IChartSettings
} from './chartcontrols';
import { runColour } from './compare';
import { LogView } from './logview';
import { spanLabel, timelineStrip } from './runtimeline';
import { MetricCharts } from './metriccharts';
import { mergePoints } from './metricpoints';
import {
  elapsedSeconds,
  formatDuration,
  formatGpus,
  IExperimentRecord,
  TERMINAL_STATES
} from './model';
import { CommandIDs } from './panel';
import { IMetricsEvent, LiveStore } from './store';
import { SystemSection } from './systemcharts';

export interface IExperimentViewOptions {
  id: string;
  store: LiveStore;
  api: KubelabApi;
  commands: CommandRegistry;
  trans: TranslationBundle;
  /** Open an output file (e.g. the executed notebook). */
  openOutput(detail: IExperimentDetail, file: IOutputFile): void;
  /** Which section to bring into view first. */
  focus?: 'logs';
}

export class ExperimentView extends ReactWidget {
  constructor(readonly options: IExperimentViewOptions) {
    super();
    this.addClass('jp-kubelab-ExperimentView');
    this.id = `kubelab-experiment-${options.id}`;
  }

  protected render(): JSX.Element {
    return <ExperimentDetailView {...this.options} />;
  }
}

/** Keep new metric points only (the initial GET and early events can overlap). */
function newerThan(
  points: IMetricsEvent['points'],
  time: number
): IMetricsEvent['points'] {
  return points.filter(point => Number(point.time ?? Infinity) > time);
}

function ExperimentDetailView(props: IExperimentViewOptions): JSX.Element {
  const { id, store, api, trans, commands } = props;
  const [detail, setDetail] = useState<IExperimentDetail | null>(null);
  const [error, setError] = useState('');
  const [points, setPoints] = useState<IMetricPoint[]>([]);
  const [chart, setChart] = useState<IChartSettings>(DEFAULT_CHART_SETTINGS);
  const [live, setLive] = useState<IExperimentRecord | null>(null);
  const logsRef = useRef<HTMLElement>(null);

  useEffect(() => {
    let disposed = false;
    let loadedUntil = -Infinity;
    let buffered: IMetricsEvent['points'] | null = [];
    const loadDetail = () =>
      api.experiment(id).then(
        value => !disposed && setDetail(value),
        reason => !disposed && setError(String(reason?.message ?? reason))
      );
    const onMetrics = (_: LiveStore, event: IMetricsEvent) => {
      if (event.id !== id) {
        return;
      }
      if (buffered) {
        buffered.push(...event.points);
      } else {
        const fresh = newerThan(event.points, loadedUntil);
        setPoints(previous => mergePoints(previous, fresh));
      }
    };
    let lastStatus = '';
    const onRecord = (_: LiveStore, record: IExperimentRecord) => {
      if (record.id !== id) {
        return;
      }
      setLive(record);
      if (record.status !== lastStatus) {
        lastStatus = record.status;
        void loadDetail(); // the timeline and outputs change with the state
      }
    };
    store.metrics.connect(onMetrics);
    store.experimentChanged.connect(onRecord);
    void loadDetail();
    api.metrics(id).then(
      points => {
        if (disposed) {
          return;
        }
        loadedUntil = Math.max(
          -Infinity,
          ...points.map(p => Number(p.time ?? -Infinity))
        );
        const late = newerThan(buffered ?? [], loadedUntil);
        buffered = null;
        setPoints(mergePoints(points, late));
      },
      reason => !disposed && setError(String(reason?.message ?? reason))
    );
    return () => {
      disposed = true;
      store.metrics.disconnect(onMetrics);
      store.experimentChanged.disconnect(onRecord);
    };
  }, [id]);

  useEffect(() => {
    if (props.focus === 'logs' && detail) {
      logsRef.current?.scrollIntoView();
    }
  }, [detail !== null]);

  if (!detail) {
    return (
      <div className="jp-kubelab-Detail">
        {error ? (
          <p className="jp-kubelab-Error" role="alert">
            {error}
          </p>
        ) : (
          <p>{trans.__('Loading…')}</p>
        )}
      </div>
    );
  }
  const record: IExperimentRecord = live ?? store.experiment(id) ?? detail;
  const terminal = TERMINAL_STATES.has(record.status);
  const act = (command: string) => () => void commands.execute(command, { id });
  return (
    <div className="jp-kubelab-Detail" data-experiment-id={id}>
      <header className="jp-kubelab-Detail-header">
        <h1>{record.name}</h1>
        <span
          className="jp-kubelab-Detail-status"
          data-status={record.status}
          title={record.reason}
        >
          <span
            className={`jp-kubelab-StatusDot jp-kubelab-StatusDot-${record.status.toLowerCase()}`}
          />
          {record.status}
        </span>
        <span className="jp-kubelab-Detail-reason">{record.reason}</span>
        {record.sweep ? (
          <span className="jp-kubelab-Detail-sweep">
            {trans.__('Trial #%1 of', record.trial ?? '?')}{' '}
            <button
              className="jp-kubelab-Link"
              onClick={() =>
                void commands.execute(CommandIDs.openSweep, {
                  id: record.sweep
                })
              }
            >
              {store.sweeps.find(s => s.id === record.sweep)?.name ??
                record.sweep}
            </button>
          </span>
        ) : null}
        <div className="jp-kubelab-Detail-actions">
          {!terminal ? (
            <button
              className="jp-Button jp-mod-styled jp-mod-warn"
              onClick={act(CommandIDs.stop)}
            >
              {trans.__('Stop')}
            </button>
          ) : null}
          {record.status === 'Stopped' ? (
            <button
              className="jp-Button jp-mod-styled jp-mod-accept"
              onClick={act(CommandIDs.resume)}
            >
              {trans.__('Resume')}
            </button>
          ) : null}
          <button
            className="jp-Button jp-mod-styled"
            onClick={act(CommandIDs.rerun)}
          >
            {trans.__('Re-run with changes…')}
          </button>
          <button
            className="jp-Button jp-mod-styled"
            onClick={act(CommandIDs.experimentTensorBoard)}
          >
            {trans.__('TensorBoard')}
          </button>
          {detail.run_dir_relative !== null ? (
            <button
              className="jp-Button jp-mod-styled"
              onClick={act(CommandIDs.openRunDir)}
            >
              {trans.__('Run directory')}
            </button>
          ) : null}
        </div>
      </header>
      <dl className="jp-kubelab-Detail-facts">
        <dt>{trans.__('ID')}</dt>
        <dd>{id}</dd>
        <dt>{trans.__('Started')}</dt>
        <dd>{record.started_at ? Time.format(record.started_at) : '—'}</dd>
        <dt>{trans.__('Duration')}</dt>
        <dd>{formatDuration(elapsedSeconds(record, Date.now()))}</dd>
        <dt>{trans.__('GPUs')}</dt>
        <dd>{formatGpus(record)}</dd>
        <dt>{trans.__('Replicas')}</dt>
        <dd>
          {record.replicas} ({record.framework})
        </dd>
        <dt>{trans.__('Run directory')}</dt>
        <dd>
          <code>{detail.run_dir}</code>
        </dd>
      </dl>

      <section className="jp-kubelab-Detail-section">
        <h2>{trans.__('Parameters')}</h2>
        <ParamsTable params={record.params ?? {}} trans={trans} />
      </section>

      <section className="jp-kubelab-Detail-section jp-kubelab-Detail-metrics">
        <h2>{trans.__('Metrics')}</h2>
        {points.length === 0 ? (
          <p className="jp-kubelab-Sidebar-empty">
            {trans.__(
              'No metrics reported yet (kubelab.report(step=…, loss=…)).'
            )}
          </p>
        ) : (
          <>
            <ChartControls settings={chart} trans={trans} onChange={setChart} />
            <MetricCharts
              runs={[{ id, label: record.name, colour: runColour(0), points }]}
              settings={chart}
              trans={trans}
            />
          </>
        )}
      </section>

      <section className="jp-kubelab-Detail-section jp-kubelab-Detail-system">
        <h2>{trans.__('System')}</h2>
        <SystemSection api={api} id={id} live={!terminal} trans={trans} />
      </section>

      <section className="jp-kubelab-Detail-section" ref={logsRef}>
        <h2>{trans.__('Logs')}</h2>
        <LogView
          api={api}
          id={id}
          name={record.name}
          replicas={record.replicas || 1}
          build={detail.history.some(entry => entry.state === 'Building')}
          follow={!terminal}
          trans={trans}
        />
      </section>

      <section className="jp-kubelab-Detail-section">
        <h2>{trans.__('Status timeline')}</h2>
        <TimelineStrip spans={detail.timeline} trans={trans} />
        <ol className="jp-kubelab-Timeline">
          <li>
            <span className="jp-kubelab-Timeline-state">
              {trans.__('Pending')}
            </span>
            <span className="jp-kubelab-Timeline-time">
              {withSeconds(record.created_at)}
            </span>
            <span className="jp-kubelab-Timeline-reason">
              {trans.__('submitted')}
            </span>
          </li>
          {detail.timeline.map((span, index) => (
            <li key={index} data-state={span.state}>
              <span className="jp-kubelab-Timeline-state">
                {spanLabel(span)}
              </span>
              <span className="jp-kubelab-Timeline-time">
                {withSeconds(span.start)}
                {span.seconds === null
                  ? ''
                  : ` · ${formatDuration(span.seconds)}`}
              </span>
              <span className="jp-kubelab-Timeline-reason">{span.reason}</span>
            </li>
          ))}
        </ol>
      </section>

      {detail.events ? (
        <section className="jp-kubelab-Detail-section">
          <h2>{trans.__('Kubernetes events')}</h2>
          {detail.events.length === 0 ? (
            <p className="jp-kubelab-Sidebar-empty">{trans.__('No events.')}</p>
          ) : (
            <table className="jp-kubelab-Events">
              <tbody>
                {detail.events.map((event, index) => (
                  <tr key={index} data-type={String(event.type ?? '')}>
                    <td>{String(event.time ?? '')}</td>
                    <td>{String(event.type ?? '')}</td>
                    <td>{String(event.reason ?? '')}</td>
                    <td>{String(event.object ?? '')}</td>
                    <td>{String(event.message ?? '')}</td>
                  </tr>
                ))}
              </tbody>
            </table>
          )}
        </section>
      ) : null}

      <section className="jp-kubelab-Detail-section">
        <h2>{trans.__('Output files')}</h2>
        {detail.outputs.length === 0 ? (
          <p className="jp-kubelab-Sidebar-empty">
            {trans.__('Nothing in outputs/ yet ($KUBELAB_OUTPUTS_DIR).')}
          </p>
        ) : (
          <ul className="jp-kubelab-Outputs">
            {detail.outputs.map(file => (
              <li key={file.path}>
                <button
                  className="jp-kubelab-Link"
                  onClick={() => props.openOutput(detail, file)}
                >
                  {file.path}
                </button>
                <span className="jp-kubelab-Number">
                  {' '}
                  {formatBytes(file.size)}
                </span>
              </li>
            ))}
          </ul>
        )}
      </section>
    </div>
  );
}

function ParamsTable(props: {
  params: Record<string, unknown>;
  trans: TranslationBundle;
}): JSX.Element {
  const entries = Object.entries(props.params);
  if (entries.length === 0) {
    return (
      <p className="jp-kubelab-Sidebar-empty">{props.trans.__('None.')}</p>
    );
  }
  return (
    <table className="jp-kubelab-Params">
      <tbody>
        {entries.map(([key, value]) => (
          <tr key={key}>
            <th>{key}</th>
            <td>
              <code>
                {typeof value === 'string' ? value : JSON.stringify(value)}
              </code>
            </td>
          </tr>
        ))}
      </tbody>
    </table>
  );
}

function formatBytes(size: number): string {
  if (size < 1024) {
    return `${size} B`;
  }
  const units = ['KiB', 'MiB', 'GiB'];
  let value = size / 1024;
  let unit = 0;
  while (value >= 1024 && unit < units.length - 1) {
    value /= 1024;
    unit++;
  }
  return `${value.toFixed(1)} ${units[unit]}`;
}

/** A timeline moment to the second: runs change state seconds apart. */
/** An elastic or preempted run's sizes over time: one bar per span, as wide as its time. */
function TimelineStrip(props: {
  spans: IExperimentDetail['timeline'];
  trans: TranslationBundle;
}): JSX.Element | null {
  const pieces = timelineStrip(props.spans, Date.now() / 1000);
  if (pieces.length === 0) {
    return null;
  }
  return (
    <div
      className="jp-kubelab-TimelineStrip"
      role="img"
      aria-label={props.trans.__('sizes over time')}
    >
      {pieces.map((piece, index) => (
        <span
          key={index}
          data-state={piece.state}
          title={`${piece.label}: ${piece.reason}`}
          style={{
            width: `${(piece.width * 100).toFixed(2)}%`,
            height: `${Math.round(piece.height * 100)}%`
          }}
        />
      ))}
    </div>
  );
}

function withSeconds(value: string): string {
  const date = new Date(value);
  return Number.isNaN(date.getTime())
    ? value
    : date.toLocaleString(undefined, {
        dateStyle: 'medium',
        timeStyle: 'medium'
      });
}

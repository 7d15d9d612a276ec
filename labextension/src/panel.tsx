/**
 * The left-sidebar panel: a backend/GPU header and the live experiments table.
 *
 * All state changes go through the pure functions in `model.ts`; this file only wires
 * the event stream to React state and renders it.
 */
import { Time } from '@jupyterlab/coreutils';
import { TranslationBundle } from '@jupyterlab/translation';
import { LabIcon, ReactWidget } from '@jupyterlab/ui-components';
import React, { useEffect, useRef, useState } from 'react';

import { IGpuType, IResources, KubelabApi } from './api';
import { IServerSentEvent, StreamState } from './events';
import {
  applyEvent,
  elapsedSeconds,
  EMPTY_TABLE,
  ExperimentEvent,
  formatDuration,
  formatLatestMetric,
  IExperimentRecord,
  IExperimentTable,
  loadTable,
  parseEvent
} from './model';

export const SIDEBAR_ID = 'kubelab:sidebar';

/** The Lumino widget JupyterLab places in the left area. */
export class ExperimentsPanel extends ReactWidget {
  constructor(
    private readonly api: KubelabApi,
    icon: LabIcon,
    private readonly trans: TranslationBundle
  ) {
    super();
    this.id = SIDEBAR_ID;
    this.addClass('jp-kubelab-Sidebar');
    this.title.icon = icon;
    this.title.caption = trans.__('Experiments');
  }

  protected render(): JSX.Element {
    return <ExperimentsView api={this.api} trans={this.trans} />;
  }
}

interface IViewProps {
  api: KubelabApi;
  trans: TranslationBundle;
}

function ExperimentsView({ api, trans }: IViewProps): JSX.Element {
  const [table, setTable] = useState<IExperimentTable>(EMPTY_TABLE);
  const [resources, setResources] = useState<IResources | null>(null);
  const [stream, setStream] = useState<StreamState>({ kind: 'connecting' });
  const tableRef = useRef<IExperimentTable>(EMPTY_TABLE);

  useEffect(() => {
    const refreshResources = () =>
      api.resources().then(setResources, reason => {
        console.warn('kubelab: could not load resources', reason);
        setResources(null);
      });
    const commit = (next: IExperimentTable) => {
      if (next !== tableRef.current) {
        tableRef.current = next;
        setTable(next);
      }
    };
    const onEvent = (message: IServerSentEvent) => {
      let event: ExperimentEvent | null;
      try {
        event = parseEvent(message.event, message.data);
      } catch (reason) {
        console.warn('kubelab: ignoring a malformed event', reason);
        return;
      }
      if (!event) {
        return;
      }
      const before = tableRef.current;
      commit(applyEvent(before, event));
      if (changesResources(before, event)) {
        void refreshResources();
      }
    };
    const events = api.events({
      onConnect: async signal => {
        const records = await api.listExperiments('', '', signal);
        if (!signal.aborted) {
          commit(loadTable(records));
          void refreshResources();
        }
      },
      onEvent,
      onStateChange: setStream
    });
    events.start();
    return () => {
      void events.stop();
    };
  }, [api]);

  const now = useNow(table.rows.some(row => row.status === 'Running'));

  return (
    <div className="jp-kubelab-Sidebar-content">
      <header className="jp-kubelab-Sidebar-header">
        <h2 className="jp-kubelab-Sidebar-title">{trans.__('Experiments')}</h2>
        <ResourceSummary resources={resources} trans={trans} />
        <StreamIndicator state={stream} trans={trans} />
      </header>
      {table.rows.length === 0 ? (
        <p className="jp-kubelab-Sidebar-empty">
          {trans.__(
            'No experiments yet. Submit one from a notebook with %1 or from a terminal with %2.',
            '%%train',
            'kubelab run'
          )}
        </p>
      ) : (
        <ExperimentTable rows={table.rows} now={now} trans={trans} />
      )}
    </div>
  );
}

/** GPUs change hands when a run appears or changes state. */
function changesResources(
  before: IExperimentTable,
  event: ExperimentEvent
): boolean {
  if (event.kind === 'deleted') {
    return false;
  }
  const previous = before.rows.find(row => row.id === event.record.id);
  return !previous || previous.status !== event.record.status;
}

/** The current time, ticking each second only while some run is running. */
function useNow(ticking: boolean): number {
  const [now, setNow] = useState(() => Date.now());
  useEffect(() => {
    if (!ticking) {
      return;
    }
    setNow(Date.now());
    const timer = setInterval(() => setNow(Date.now()), 1000);
    return () => clearInterval(timer);
  }, [ticking]);
  return now;
}

function ResourceSummary(props: {
  resources: IResources | null;
  trans: TranslationBundle;
}): JSX.Element {
  const { resources, trans } = props;
  if (!resources) {
    return (
      <div className="jp-kubelab-Sidebar-resources">
        {trans.__('Backend: …')}
      </div>
    );
  }
  const { backend, gpus } = resources;
  const gpuText =
    gpus.total === 0
      ? trans.__('no GPUs')
      : trans._n(
          '%2 of %1 GPU free',
          '%2 of %1 GPUs free',
          gpus.total,
          gpus.free
        ) +
        (gpus.types.length
          ? ` (${gpus.types.map(describeType).join(', ')})`
          : '');
  return (
    <div className="jp-kubelab-Sidebar-resources" data-backend={backend}>
      {trans.__('Backend: %1 · %2', backend, gpuText)}
    </div>
  );
}

/** `T4 ×2`, or just `T4` when the server does not count per type. */
function describeType(type: IGpuType): string {
  return type.total === null ? type.name : `${type.name} ×${type.total}`;
}

function StreamIndicator(props: {
  state: StreamState;
  trans: TranslationBundle;
}): JSX.Element {
  const { state, trans } = props;
  const text =
    state.kind === 'live'
      ? trans.__('Live')
      : state.kind === 'waiting'
        ? trans.__('Reconnecting in %1 s', Math.ceil(state.retryInMs / 1000))
        : state.kind === 'connecting'
          ? trans.__('Connecting…')
          : trans.__('Stopped');
  return (
    <div
      className={`jp-kubelab-Stream jp-kubelab-Stream-${state.kind}`}
      data-stream-state={state.kind}
      title={state.kind === 'waiting' ? state.error : text}
    >
      {text}
    </div>
  );
}

/**
 * A sidebar is narrow, so each experiment takes two lines in two columns: name and
 * status (with when it started) on the left, duration and latest metric on the right.
 */
function ExperimentTable(props: {
  rows: readonly IExperimentRecord[];
  now: number;
  trans: TranslationBundle;
}): JSX.Element {
  const { rows, now, trans } = props;
  return (
    <table className="jp-kubelab-Table">
      <thead>
        <tr>
          <th>{trans.__('Experiment')}</th>
          <th className="jp-kubelab-Table-numbers">{trans.__('Duration')}</th>
        </tr>
      </thead>
      <tbody>
        {rows.map(row => (
          <ExperimentRow key={row.id} row={row} now={now} trans={trans} />
        ))}
      </tbody>
    </table>
  );
}

function ExperimentRow(props: {
  row: IExperimentRecord;
  now: number;
  trans: TranslationBundle;
}): JSX.Element {
  const { row, now, trans } = props;
  const reason =
    row.exit_code === null || row.exit_code === undefined
      ? row.reason
      : trans.__('%1 (exit code %2)', row.reason, row.exit_code);
  return (
    <tr className="jp-kubelab-Row" data-experiment-id={row.id}>
      <td className="jp-kubelab-Row-main">
        <div className="jp-kubelab-Row-name" title={`${row.name} (${row.id})`}>
          {row.name}
        </div>
        <div className="jp-kubelab-Row-detail">
          <span
            className="jp-kubelab-Row-status"
            data-status={row.status}
            title={reason}
          >
            <span
              className={`jp-kubelab-StatusDot jp-kubelab-StatusDot-${row.status.toLowerCase()}`}
            />
            {row.status}
          </span>
          <span
            className="jp-kubelab-Row-started"
            title={
              row.started_at
                ? Time.format(row.started_at)
                : trans.__('not started')
            }
          >
            {row.started_at ? ` · ${Time.formatHuman(row.started_at)}` : ''}
          </span>
        </div>
      </td>
      <td className="jp-kubelab-Table-numbers">
        <div className="jp-kubelab-Row-duration">
          {formatDuration(elapsedSeconds(row, now))}
        </div>
        <div
          className="jp-kubelab-Row-metric"
          title={trans.__('latest metric')}
        >
          {formatLatestMetric(row)}
        </div>
      </td>
    </tr>
  );
}

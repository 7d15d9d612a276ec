/**
 * The sweep view in the main area: progress and best trial, the objective per trial
 * with the best-so-far line, parallel coordinates, and the trials table. It re-reads
 * `GET sweeps/<id>` when a `sweep` event or one of its trials' `experiment` events
 * arrives (debounced), never on a timer.
 */
import { TranslationBundle } from '@jupyterlab/translation';
import { ReactWidget } from '@jupyterlab/ui-components';
import { CommandRegistry } from '@lumino/commands';
import React, { useEffect, useState } from 'react';

import { KubelabApi } from './api';
import { ObjectiveChart, ParallelCoordinates } from './chartviews';
import { formatNumber, formatParams, IExperimentRecord } from './model';
import { CommandIDs } from './panel';
import { LiveStore } from './store';
import {
  formatBest,
  formatProgress,
  ISweepDetail,
  ISweepRecord,
  parameterNames
} from './sweeps';

export interface ISweepViewOptions {
  id: string;
  store: LiveStore;
  api: KubelabApi;
  commands: CommandRegistry;
  trans: TranslationBundle;
}

export class SweepView extends ReactWidget {
  constructor(readonly options: ISweepViewOptions) {
    super();
    this.addClass('jp-kubelab-SweepView');
    this.id = `kubelab-sweep-${options.id}`;
  }

  protected render(): JSX.Element {
    return <SweepDetailView {...this.options} />;
  }
}

function SweepDetailView(props: ISweepViewOptions): JSX.Element {
  const { id, store, api, commands, trans } = props;
  const [detail, setDetail] = useState<ISweepDetail | null>(null);
  const [error, setError] = useState('');
  useEffect(() => {
    let disposed = false;
    let timer: ReturnType<typeof setTimeout> | null = null;
    const load = () =>
      api.sweep(id).then(
        value => {
          if (!disposed) {
            setDetail(value);
            setError('');
          }
        },
        reason => !disposed && setError(String(reason?.message ?? reason))
      );
    const soon = () => {
      if (timer === null) {
        timer = setTimeout(() => {
          timer = null;
          void load();
        }, 500);
      }
    };
    const onSweep = (_: LiveStore, record: ISweepRecord) => {
      if (record.id === id) {
        soon();
      }
    };
    const onExperiment = (_: LiveStore, record: IExperimentRecord) => {
      if (record.sweep === id) {
        soon();
      }
    };
    store.sweepChanged.connect(onSweep);
    store.experimentChanged.connect(onExperiment);
    void load();
    return () => {
      disposed = true;
      if (timer !== null) {
        clearTimeout(timer);
      }
      store.sweepChanged.disconnect(onSweep);
      store.experimentChanged.disconnect(onExperiment);
    };
  }, [id]);
  if (!detail) {
    return (
      <div className="jp-kubelab-Detail">
        {error ? (
          <p className="jp-kubelab-Error">{error}</p>
        ) : (
          <p>{trans.__('Loading…')}</p>
        )}
      </div>
    );
  }
  const { metric, direction } = detail.objective;
  const names = parameterNames(detail.trials);
  return (
    <div className="jp-kubelab-Detail" data-sweep-id={id}>
      <header className="jp-kubelab-Detail-header">
        <h1>{detail.name}</h1>
        <span className="jp-kubelab-Detail-status" data-status={detail.status}>
          <span
            className={`jp-kubelab-StatusDot jp-kubelab-StatusDot-${detail.status.toLowerCase()}`}
          />
          {detail.status}
        </span>
        <span className="jp-kubelab-Detail-reason">
          {trans.__('%1 trials finished', formatProgress(detail))} ·{' '}
          {formatBest(detail)} · {detail.tuner}
        </span>
        <div className="jp-kubelab-Detail-actions">
          {detail.status === 'Running' ? (
            <button
              className="jp-Button jp-mod-styled jp-mod-warn"
              onClick={() =>
                void commands.execute(CommandIDs.stopSweep, { id })
              }
            >
              {trans.__('Stop')}
            </button>
          ) : null}
          <button
            className="jp-Button jp-mod-styled"
            onClick={() =>
              void api.startTensorBoard({ sweep: id }).then(session =>
                commands.execute(CommandIDs.openTensorBoard, {
                  id: session.id,
                  url: session.url
                })
              )
            }
          >
            {trans.__('TensorBoard')}
          </button>
          <button
            className="jp-Button jp-mod-styled jp-kubelab-CompareTrials"
            onClick={() =>
              void commands.execute(CommandIDs.compare, {
                ids: detail.trials
                  .map(t => t.id)
                  .filter((t): t is string => t !== null)
              })
            }
          >
            {trans.__('Compare trials')}
          </button>
        </div>
      </header>
      {error ? <p className="jp-kubelab-Error">{error}</p> : null}
      <div className="jp-kubelab-Charts">
        <ObjectiveChart
          trials={detail.trials}
          metric={metric}
          direction={direction}
          trans={trans}
        />
        <ParallelCoordinates
          trials={detail.trials}
          metric={metric}
          direction={direction}
          trans={trans}
        />
      </div>
      <section className="jp-kubelab-Detail-section">
        <h2>{trans.__('Trials')}</h2>
        <table className="jp-kubelab-Trials">
          <thead>
            <tr>
              <th>#</th>
              <th>{trans.__('Status')}</th>
              <th>{metric}</th>
              {names.map(name => (
                <th key={name}>{name}</th>
              ))}
            </tr>
          </thead>
          <tbody>
            {detail.trials.map(trial => (
              <tr
                key={trial.trial}
                data-trial={trial.trial}
                className={
                  detail.best && detail.best.trial === trial.trial
                    ? 'jp-kubelab-Trials-best'
                    : ''
                }
                onClick={() =>
                  trial.id &&
                  void commands.execute(CommandIDs.openExperiment, {
                    id: trial.id
                  })
                }
                title={trial.result_reason ?? formatParams(trial.params)}
              >
                <td>{trial.trial}</td>
                <td>
                  <span
                    className={`jp-kubelab-StatusDot jp-kubelab-StatusDot-${String(trial.status).toLowerCase()}`}
                  />
                  {trial.status}
                  {trial.result && trial.result !== 'complete'
                    ? ` (${trial.result})`
                    : ''}
                </td>
                <td className="jp-kubelab-Number">
                  {typeof trial.objective === 'number'
                    ? formatNumber(trial.objective)
                    : '—'}
                </td>
                {names.map(name => (
                  <td key={name}>{formatValue(trial.params?.[name])}</td>
                ))}
              </tr>
            ))}
          </tbody>
        </table>
      </section>
    </div>
  );
}

function formatValue(value: unknown): string {
  if (value === undefined || value === null) {
    return '—';
  }
  return typeof value === 'number'
    ? formatNumber(value)
    : typeof value === 'string'
      ? value
      : JSON.stringify(value);
}

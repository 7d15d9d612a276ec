/**
 * The sweep view in the main area: progress and best trial with Stop / Resume, the
 * objective per trial with the best so far, every trial's intermediate results overlaid
 * per metric (pruned trials dashed), parallel coordinates whose brushes filter every panel
 * (and what Compare trials opens with), and the sortable trials table. It re-reads `GET sweeps/<id>` and
 * `GET sweeps/<id>/metrics` when a `sweep` event or one of its trials' `experiment`
 * events arrives (debounced), and every 5 s while the sweep runs, so a missed
 * event cannot leave the view stale.
 */
import { TranslationBundle } from '@jupyterlab/translation';
import { ReactWidget } from '@jupyterlab/ui-components';
import { CommandRegistry } from '@lumino/commands';
import React, { useEffect, useMemo, useRef, useState } from 'react';

import { ITrialPoints, KubelabApi } from './api';
import { Brushes, brushedTrials } from './brush';
import {
  ChartControls,
  DEFAULT_CHART_SETTINGS,
  IChartSettings
} from './chartcontrols';
import { parallelCoordinates } from './charts';
import { runStyle } from './compare';
import { IChartRun, MetricCharts } from './metriccharts';
import { IExperimentRecord } from './model';
import { ObjectiveChart } from './objectivechart';
import { CommandIDs } from './panel';
import { ServiceCommandIDs } from './servicelist';
import { ParallelCoordinates } from './parallelcoordinates';
import { ImportanceBars } from './importancebars';
import { ParamScatters } from './paramscatter';
import { LiveStore } from './store';
import {
  choiceValues,
  formatBest,
  formatProgress,
  ISweepDetail,
  ISweepRecord,
  ITrialSort,
  parameterNames
} from './sweeps';
import { TrialTable } from './trialtable';

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

const FALLBACK_MS = 5000;
const TERMINAL_SWEEP = new Set(['Succeeded', 'Failed', 'Stopped']);

/** The sweep's record and its trials' points, re-read after events about it. */
function useSweep(
  props: ISweepViewOptions
): [ISweepDetail | null, ITrialPoints[], string] {
  const { id, store, api } = props;
  const [detail, setDetail] = useState<ISweepDetail | null>(null);
  const [curves, setCurves] = useState<ITrialPoints[]>([]);
  const [error, setError] = useState('');
  const running = useRef(true);
  useEffect(() => {
    let disposed = false;
    let timer: ReturnType<typeof setTimeout> | null = null;
    const load = () =>
      Promise.all([api.sweep(id), api.sweepMetrics(id)]).then(
        ([value, points]) => {
          if (!disposed) {
            running.current = !TERMINAL_SWEEP.has(value.status);
            setDetail(value);
            setCurves(points);
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
    // While the sweep runs, a slow re-read too: an event the view missed (a reconnection,
    // a view opened while its sweep's last event was in flight) cannot leave it stale.
    const fallback = setInterval(() => {
      if (running.current) {
        void load();
      }
    }, FALLBACK_MS);
    return () => {
      disposed = true;
      clearInterval(fallback);
      if (timer !== null) {
        clearTimeout(timer);
      }
      store.sweepChanged.disconnect(onSweep);
      store.experimentChanged.disconnect(onExperiment);
    };
  }, [id]);
  return [detail, curves, error];
}

function SweepDetailView(props: ISweepViewOptions): JSX.Element {
  const { id, api, commands, trans } = props;
  const [detail, curves, error] = useSweep(props);
  const [chart, setChart] = useState<IChartSettings>(DEFAULT_CHART_SETTINGS);
  const [brushes, setBrushes] = useState<Brushes>(new Map());
  const [sort, setSort] = useState<ITrialSort>({
    key: 'trial',
    descending: false
  });
  const parallel = useMemo(
    () =>
      detail
        ? parallelCoordinates(
            detail.trials,
            detail.objective.metric,
            detail.objective.direction,
            choiceValues(detail.spec)
          )
        : { axes: [], lines: [] },
    [detail]
  );
  const runs: IChartRun[] = useMemo(
    () =>
      curves.map(trial => {
        const pruned = trial.result === 'pruned';
        return {
          id: trial.id ?? `trial-${trial.trial}`,
          label: pruned
            ? trans.__('#%1 (pruned)', trial.trial)
            : `#${trial.trial}`,
          ...runStyle(trial.trial), // a trial's colour is its number's, in every chart
          points: trial.points,
          dashed: pruned
        };
      }),
    [curves]
  );
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
  const passing = brushedTrials(parallel.lines, brushes);
  const shown = passing
    ? detail.trials.filter(t => passing.has(t.trial))
    : detail.trials;
  // A brush on the parallel coordinates filters every panel, and what Compare opens with.
  const shownRuns = passing
    ? runs.filter((_, index) => passing.has(curves[index].trial))
    : runs;
  const pruned = curves.filter(t => t.result === 'pruned').length;
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
          ) : (
            <button
              className="jp-Button jp-mod-styled jp-mod-accept"
              onClick={() =>
                void commands.execute(CommandIDs.resumeSweep, { id })
              }
            >
              {trans.__('Resume…')}
            </button>
          )}
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
                ids: shown.map(t => t.id).filter((t): t is string => t !== null)
              })
            }
          >
            {trans.__('Compare trials')}
          </button>
          {detail.best ? (
            <button
              className="jp-Button jp-mod-styled jp-kubelab-ServeBest"
              title={trans.__(
                'Serve the model file of trial #%1',
                detail.best.trial
              )}
              onClick={() =>
                void commands.execute(ServiceCommandIDs.serveSweep, {
                  id,
                  name: detail.name
                })
              }
            >
              {trans.__('Serve best…')}
            </button>
          ) : null}
        </div>
      </header>
      {error ? <p className="jp-kubelab-Error">{error}</p> : null}
      <ChartControls settings={chart} trans={trans} onChange={setChart} />
      <div className="jp-kubelab-Charts">
        <ObjectiveChart
          trials={shown}
          metric={metric}
          direction={direction}
          log={chart.log}
          trans={trans}
        />
        <ParamScatters
          trials={shown}
          names={names}
          metric={metric}
          log={chart.log}
          trans={trans}
        />
      </div>
      <ParallelCoordinates
        axes={parallel.axes}
        lines={parallel.lines}
        brushes={brushes}
        metric={metric}
        trans={trans}
        onBrush={setBrushes}
      />
      <ImportanceBars importance={detail.importance} trans={trans} />
      <section className="jp-kubelab-Detail-section jp-kubelab-SweepCurves">
        <h2>
          {trans.__('Intermediate results')}
          {pruned ? (
            <span className="jp-kubelab-Detail-note">
              {' '}
              {trans.__('(%1 pruned, dashed)', pruned)}
            </span>
          ) : null}
        </h2>
        <MetricCharts
          runs={shownRuns}
          settings={chart}
          trans={trans}
          finalName={detail.objective.metric}
        />
      </section>
      <section className="jp-kubelab-Detail-section">
        <h2>
          {trans.__('Trials')}
          <span className="jp-kubelab-Detail-note" data-trials-shown="">
            {' '}
            {passing
              ? trans.__(
                  '%1 of %2 (filtered on the parallel coordinates)',
                  shown.length,
                  detail.trials.length
                )
              : ''}
          </span>
        </h2>
        <TrialTable
          trials={shown}
          params={names}
          metric={metric}
          best={detail.best?.trial ?? null}
          sort={sort}
          trans={trans}
          onSort={setSort}
          onOpen={trial =>
            trial.id &&
            void commands.execute(CommandIDs.openExperiment, { id: trial.id })
          }
        />
      </section>
    </div>
  );
}

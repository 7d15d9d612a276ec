/**
 * Parameter against objective: one scatter per numeric parameter of a sweep, each finished
 * trial a dot at (its value, its objective), drawn by the shared uPlot chart (hover for the
 * values, drag to zoom). It takes the trials the view shows, so a brush filters it too.
 */
import { TranslationBundle } from '@jupyterlab/translation';
import React, { useMemo } from 'react';

import { forLogScale, runColour } from './compare';
import { OverlayChart } from './overlaychart';
import { ITrialRow } from './sweeps';

/** (value, objective) of each trial with a finite number for both, in value order. */
export function paramPoints(
  trials: readonly ITrialRow[],
  name: string
): { x: number; y: number }[] {
  return trials
    .filter(
      t =>
        typeof t.params[name] === 'number' &&
        Number.isFinite(t.params[name]) &&
        typeof t.objective === 'number' &&
        Number.isFinite(t.objective)
    )
    .map(t => ({ x: t.params[name] as number, y: t.objective as number }))
    .sort((a, b) => a.x - b.x);
}

function ParamScatter(props: {
  trials: readonly ITrialRow[];
  name: string;
  metric: string;
  log: boolean;
  trans: TranslationBundle;
}): JSX.Element | null {
  const { trials, name, metric, log, trans } = props;
  const points = paramPoints(trials, name);
  const key = points.map(p => `${p.x}:${p.y}`).join(',');
  const data = useMemo(() => {
    const ys = points.map(p => p.y);
    return [points.map(p => p.x), log ? forLogScale(ys) : ys] as [
      number[],
      ...(number | null)[][]
    ];
  }, [key, log]);
  const series = useMemo(
    () => [{ label: metric, colour: runColour(0), scatter: true }],
    [metric]
  );
  if (!points.length) {
    return null;
  }
  return (
    <div
      className="jp-kubelab-ParamScatter"
      data-param={name}
      data-points={points.length}
    >
      <OverlayChart
        metric={metric}
        title={trans.__('%1 against %2', metric, name)}
        data={data}
        series={series}
        wallTime={false}
        log={log}
        xLabel={name}
        trans={trans}
      />
    </div>
  );
}

/** A scatter for each parameter that has numbers among the trials. */
export function ParamScatters(props: {
  trials: readonly ITrialRow[];
  names: readonly string[];
  metric: string;
  log: boolean;
  trans: TranslationBundle;
}): JSX.Element {
  return (
    <>
      {props.names.map(name => (
        <ParamScatter
          key={name}
          trials={props.trials}
          name={name}
          metric={props.metric}
          log={props.log}
          trans={props.trans}
        />
      ))}
    </>
  );
}

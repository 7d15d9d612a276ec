/**
 * The objective of each finished trial (dots) and the best so far (a staircase), drawn
 * by the shared uPlot chart: hover a trial for its value, drag to zoom.
 */
import { TranslationBundle } from '@jupyterlab/translation';
import React, { useMemo } from 'react';

import { bestSoFar, Direction, objectivePoints } from './charts';
import { forLogScale, runColour } from './compare';
import { OverlayChart } from './overlaychart';
import { ITrialRow } from './sweeps';

export function ObjectiveChart(props: {
  trials: readonly ITrialRow[];
  metric: string;
  direction: Direction;
  log: boolean;
  trans: TranslationBundle;
}): JSX.Element | null {
  const { trials, metric, direction, log, trans } = props;
  const points = objectivePoints(trials);
  const key = points.map(p => `${p.x}:${p.y}`).join(',');
  const data = useMemo(() => {
    const best = bestSoFar(points, direction);
    const ys = [points.map(p => p.y), best.map(p => p.y)];
    return [points.map(p => p.x), ...(log ? ys.map(forLogScale) : ys)] as [
      number[],
      ...(number | null)[][]
    ];
  }, [key, direction, log]);
  const series = useMemo(
    () => [
      { label: metric, colour: runColour(0), scatter: true },
      { label: trans.__('best so far'), colour: runColour(1), stepped: true }
    ],
    [metric]
  );
  if (!points.length) {
    return null;
  }
  return (
    <div className="jp-kubelab-ObjectiveChart">
      <OverlayChart
        metric={metric}
        title={trans.__('%1 per trial (%2)', metric, direction)}
        data={data}
        series={series}
        wallTime={false}
        log={log}
        xLabel={trans.__('trial')}
        integerX
        trans={trans}
      />
    </div>
  );
}

/**
 * Plain-SVG charts: a metric over steps, the objective per trial with its best-so-far
 * line, and parallel coordinates. The geometry comes from `charts.ts`; colours come
 * from JupyterLab's theme variables (see style/base.css).
 */
import { TranslationBundle } from '@jupyterlab/translation';
import React from 'react';

import {
  bestSoFar,
  Direction,
  downsample,
  extent,
  IPoint,
  linearScale,
  linePath,
  niceTicks,
  objectivePoints,
  parallelCoordinates,
  stepPath
} from './charts';
import { formatNumber } from './model';
import { ITrialRow } from './sweeps';

const WIDTH = 360;
const HEIGHT = 180;
const MARGIN = { top: 10, right: 12, bottom: 24, left: 48 };
const MAX_POINTS = 800;

interface IFrame {
  sx: (x: number) => number;
  sy: (y: number) => number;
  xTicks: number[];
  yTicks: number[];
}

function frame(points: readonly IPoint[]): IFrame | null {
  const xs = extent(points.map(p => p.x));
  const ys = extent(points.map(p => p.y));
  if (!xs || !ys) {
    return null;
  }
  return {
    sx: linearScale(xs, [MARGIN.left, WIDTH - MARGIN.right]),
    sy: linearScale(ys, [HEIGHT - MARGIN.bottom, MARGIN.top]),
    xTicks: niceTicks(xs[0], xs[1], 4).filter(t => t >= xs[0] && t <= xs[1]),
    yTicks: niceTicks(ys[0], ys[1], 3).filter(t => t >= ys[0] && t <= ys[1])
  };
}

function Axes(props: { frame: IFrame }): JSX.Element {
  const { sx, sy, xTicks, yTicks } = props.frame;
  return (
    <g className="jp-kubelab-Chart-axes">
      <line
        x1={MARGIN.left}
        x2={WIDTH - MARGIN.right}
        y1={HEIGHT - MARGIN.bottom}
        y2={HEIGHT - MARGIN.bottom}
      />
      <line
        x1={MARGIN.left}
        x2={MARGIN.left}
        y1={MARGIN.top}
        y2={HEIGHT - MARGIN.bottom}
      />
      {xTicks.map(t => (
        <text
          key={`x${t}`}
          x={sx(t)}
          y={HEIGHT - MARGIN.bottom + 14}
          textAnchor="middle"
        >
          {formatNumber(t)}
        </text>
      ))}
      {yTicks.map(t => (
        <g key={`y${t}`}>
          <line
            className="jp-kubelab-Chart-grid"
            x1={MARGIN.left}
            x2={WIDTH - MARGIN.right}
            y1={sy(t)}
            y2={sy(t)}
          />
          <text x={MARGIN.left - 4} y={sy(t) + 4} textAnchor="end">
            {formatNumber(t)}
          </text>
        </g>
      ))}
    </g>
  );
}

/** One metric over steps. */
export function MetricChart(props: {
  name: string;
  points: readonly IPoint[];
}): JSX.Element {
  const points = downsample(props.points, MAX_POINTS);
  const f = frame(points);
  const last = props.points[props.points.length - 1];
  if (props.points.length === 1) {
    // One number (a final result, say) reads better as a number than as a dot on axes.
    return (
      <figure
        className="jp-kubelab-Chart jp-kubelab-Chart-single"
        data-metric={props.name}
      >
        <figcaption>{props.name}</figcaption>
        <output className="jp-kubelab-Chart-value">
          {formatNumber(last.y)}
        </output>
      </figure>
    );
  }
  return (
    <figure className="jp-kubelab-Chart" data-metric={props.name}>
      <figcaption>
        {props.name}
        {last ? (
          <span className="jp-kubelab-Chart-latest">
            {' '}
            {formatNumber(last.y)} @{last.x}
          </span>
        ) : null}
      </figcaption>
      <svg viewBox={`0 0 ${WIDTH} ${HEIGHT}`} role="img">
        {f ? (
          <>
            <Axes frame={f} />
            <path
              className="jp-kubelab-Chart-line"
              d={linePath(points, f.sx, f.sy)}
            />
            {points.length === 1 ? (
              <circle
                className="jp-kubelab-Chart-dot"
                cx={f.sx(points[0].x)}
                cy={f.sy(points[0].y)}
                r={3}
              />
            ) : null}
          </>
        ) : null}
      </svg>
    </figure>
  );
}

/** Objective per trial (dots) and the best so far (a staircase). */
export function ObjectiveChart(props: {
  trials: readonly ITrialRow[];
  metric: string;
  direction: Direction;
  trans: TranslationBundle;
}): JSX.Element {
  const { trans } = props;
  const points = objectivePoints(props.trials);
  const best = bestSoFar(points, props.direction);
  const f = frame(points);
  return (
    <figure className="jp-kubelab-Chart jp-kubelab-ObjectiveChart">
      <figcaption>
        {trans.__('%1 per trial (%2)', props.metric, props.direction)}
        <span className="jp-kubelab-Chart-legend">
          <span className="jp-kubelab-Chart-swatch-dot" /> {trans.__('trial')}
          <span className="jp-kubelab-Chart-swatch-best" />{' '}
          {trans.__('best so far')}
        </span>
      </figcaption>
      <svg viewBox={`0 0 ${WIDTH} ${HEIGHT}`} role="img">
        {f ? (
          <>
            <Axes frame={f} />
            <path
              className="jp-kubelab-Chart-best"
              d={stepPath(best, f.sx, f.sy)}
            />
            {points.map(p => (
              <circle
                key={p.x}
                className="jp-kubelab-Chart-dot"
                cx={f.sx(p.x)}
                cy={f.sy(p.y)}
                r={3}
              >
                <title>
                  #{p.x}: {formatNumber(p.y)}
                </title>
              </circle>
            ))}
          </>
        ) : null}
      </svg>
    </figure>
  );
}

/** Parameters against the objective: one vertical axis each, one polyline per trial. */
export function ParallelCoordinates(props: {
  trials: readonly ITrialRow[];
  metric: string;
  direction: Direction;
  trans: TranslationBundle;
}): JSX.Element {
  const { trans } = props;
  const { axes, lines } = parallelCoordinates(
    props.trials,
    props.metric,
    props.direction
  );
  const width = Math.max(WIDTH, axes.length * 110);
  const height = 220;
  const top = 24;
  const bottom = height - 16;
  const x = linearScale([0, Math.max(1, axes.length - 1)], [50, width - 50]);
  const y = (position: number) => bottom - position * (bottom - top);
  return (
    <figure className="jp-kubelab-Chart jp-kubelab-Parallel">
      <figcaption>{trans.__('parameters → %1', props.metric)}</figcaption>
      <svg viewBox={`0 0 ${width} ${height}`} role="img">
        {lines.map(line => {
          const points = line.positions
            .map((p, i) => (p === null ? null : `${x(i)},${y(p)}`))
            .filter(Boolean)
            .join(' ');
          return (
            <polyline
              key={line.trial}
              className="jp-kubelab-Parallel-line"
              data-trial={line.trial}
              points={points}
              style={{
                opacity:
                  line.quality === null ? 0.25 : 0.3 + 0.7 * line.quality,
                strokeWidth:
                  line.quality !== null && line.quality > 0.99 ? 2.5 : 1.2
              }}
            >
              <title>
                #{line.trial}
                {line.objective === null
                  ? ''
                  : `: ${formatNumber(line.objective)}`}
              </title>
            </polyline>
          );
        })}
        {axes.map((axis, i) => (
          <g key={axis.name} className="jp-kubelab-Parallel-axis">
            <line x1={x(i)} x2={x(i)} y1={top} y2={bottom} />
            <text
              x={x(i)}
              y={12}
              textAnchor="middle"
              className="jp-kubelab-Parallel-name"
            >
              {axis.name}
              {axis.kind === 'log' ? trans.__(' (log)') : ''}
            </text>
            {axis.ticks.map(tick => (
              <text key={tick.label} x={x(i) + 4} y={y(tick.at) + 4}>
                {tick.label}
              </text>
            ))}
          </g>
        ))}
      </svg>
    </figure>
  );
}

/**
 * The one chart component: one metric's curves for one or several runs, drawn by uPlot
 * (canvas; hover values in its legend, drag to zoom, double-click or "Reset zoom" to see
 * everything). A series can be dashed (a pruned trial), dots only (objective per trial)
 * or a staircase (best so far). Axis and grid colours come from JupyterLab's theme
 * variables, read again when the theme changes.
 */
import { TranslationBundle } from '@jupyterlab/translation';
import React, { useEffect, useRef } from 'react';
import uPlot from 'uplot';

import { INTEGER_INCRS } from './charts';
import { formatNumber } from './model';

export interface IOverlaySeries {
  label: string;
  colour: string;
  /** A dash pattern in pixels, e.g. [4, 4] for a trial stopped early. */
  dash?: number[];
  /** Dots without a line. */
  scatter?: boolean;
  /** A staircase: level until the next x. */
  stepped?: boolean;
  /** A thin, pale line (a group's min or max, the edges of its band). */
  faint?: boolean;
}

export interface IOverlayChartProps {
  metric: string;
  /** uPlot's columns: the shared x values, then one column per series. */
  data: [number[], ...(number | null)[][]];
  series: readonly IOverlaySeries[];
  wallTime: boolean;
  log: boolean;
  xLabel: string;
  trans: TranslationBundle;
  /** The caption (the metric's name when not given). */
  title?: string;
  /** A short text after the caption, e.g. the latest value of a single run. */
  latest?: string;
  /** The x values are counts (trials): ticks only at whole numbers, never 2.5. */
  integerX?: boolean;
  /** Charts with the same key move one cursor: hovering a step in one shows it in all. */
  syncKey?: string;
  /** Areas filled between two series (indexes into `series`: upper, lower), in the upper's colour. */
  bands?: readonly [number, number][];
}

const HEIGHT = 220;

function themeColour(name: string, fallback: string): string {
  return (
    getComputedStyle(document.body).getPropertyValue(name).trim() || fallback
  );
}

function axis(label: string): uPlot.Axis {
  const text = themeColour('--jp-ui-font-color1', '#222');
  const grid = themeColour('--jp-border-color2', '#ddd');
  const font = `${themeColour('--jp-ui-font-size1', '13px')} ${themeColour(
    '--jp-ui-font-family',
    'sans-serif'
  )}`;
  return {
    label,
    stroke: text,
    font,
    labelFont: font,
    grid: { stroke: grid, width: 1 },
    ticks: { stroke: grid, width: 1 }
  };
}

function seriesOptions(s: IOverlaySeries): uPlot.Series {
  const options: uPlot.Series = {
    label: s.label,
    stroke: s.colour,
    width: 1.5,
    spanGaps: true,
    value: (_u: uPlot, v: number | null) =>
      v === null || v === undefined ? '–' : formatNumber(v)
  };
  if (s.dash) {
    options.dash = s.dash;
  }
  if (s.faint) {
    options.width = 0.75;
    options.stroke = `${s.colour}66`;
  }
  if (s.scatter) {
    options.paths = () => null;
    options.points = { show: true, size: 7, fill: s.colour };
  } else if (s.stepped) {
    options.paths = uPlot.paths.stepped?.({ align: 1 });
    options.points = { show: false };
  }
  return options;
}

export function OverlayChart(props: IOverlayChartProps): JSX.Element {
  const host = useRef<HTMLDivElement>(null);
  const plot = useRef<uPlot | null>(null);
  const { data, series, wallTime, log, xLabel, metric, trans } = props;

  useEffect(() => {
    const node = host.current;
    if (!node) {
      return;
    }
    const make = () => {
      plot.current?.destroy();
      const options: uPlot.Options = {
        width: Math.max(240, node.clientWidth),
        height: HEIGHT,
        scales: {
          x: { time: wallTime },
          y: log ? { distr: 3 } : {}
        },
        axes: [
          props.integerX
            ? { ...axis(xLabel), incrs: [...INTEGER_INCRS] }
            : axis(xLabel),
          axis(metric)
        ],
        cursor: {
          drag: { x: true, y: false },
          // By x value only: the charts share the x axis, not the metric's scale.
          sync: props.syncKey
            ? { key: props.syncKey, scales: ['x', null] }
            : undefined
        },
        legend: { live: true },
        series: [{ label: xLabel }, ...series.map(seriesOptions)],
        bands: (props.bands ?? []).map(([upper, lower]) => ({
          series: [upper + 1, lower + 1] as [number, number],
          fill: `${series[upper].colour}33`
        }))
      };
      plot.current = new uPlot(options, data as uPlot.AlignedData, node);
    };
    make();
    const resize = new ResizeObserver(() =>
      plot.current?.setSize({
        width: Math.max(240, node.clientWidth),
        height: HEIGHT
      })
    );
    resize.observe(node);
    const theme = new MutationObserver(make);
    theme.observe(document.body, {
      attributes: true,
      attributeFilter: ['data-jp-theme-name']
    });
    return () => {
      resize.disconnect();
      theme.disconnect();
      plot.current?.destroy();
      plot.current = null;
    };
  }, [
    data,
    series,
    wallTime,
    log,
    xLabel,
    metric,
    props.integerX,
    props.syncKey,
    props.bands
  ]);

  const reset = () => {
    const xs = data[0];
    if (plot.current && xs.length) {
      plot.current.setScale('x', { min: xs[0], max: xs[xs.length - 1] });
    }
  };

  return (
    <figure className="jp-kubelab-Overlay" data-metric={metric}>
      <figcaption className="jp-kubelab-Overlay-title">
        <span>{props.title ?? metric}</span>
        {props.latest ? (
          <span className="jp-kubelab-Overlay-latest">{props.latest}</span>
        ) : null}
        <button
          className="jp-Button jp-mod-minimal jp-kubelab-Overlay-reset"
          onClick={reset}
          title={trans.__('Drag across the chart to zoom; this shows it all')}
        >
          {trans.__('Reset zoom')}
        </button>
      </figcaption>
      <div className="jp-kubelab-Overlay-plot" ref={host} />
    </figure>
  );
}

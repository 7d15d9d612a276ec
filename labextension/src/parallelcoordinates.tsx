/**
 * Parallel coordinates of a sweep: an axis per parameter (a category axis for `choice`
 * parameters, log for ones spanning decades) and the objective, a line per trial on a
 * canvas coloured by how good its objective is. Drag along an axis to brush a range;
 * the trials outside every brush fade and leave the trials table. Click an axis without
 * dragging to clear its brush.
 */
import { TranslationBundle } from '@jupyterlab/translation';
import React, { useEffect, useRef, useState } from 'react';

import { brushRange, Brushes, insideBrushes, qualityColour } from './brush';
import { IAxis, IParallelLine } from './charts';

const HEIGHT = 260;
const TOP = 34;
const BOTTOM = 18;
const SIDE = 60;
/** The axes' hit areas reach this far past the ends, so a brush can start at an end. */
const PAD = 10;

export function ParallelCoordinates(props: {
  axes: readonly IAxis[];
  lines: readonly IParallelLine[];
  brushes: Brushes;
  metric: string;
  trans: TranslationBundle;
  onBrush(brushes: Brushes): void;
}): JSX.Element {
  const { axes, lines, brushes, trans } = props;
  const host = useRef<HTMLDivElement>(null);
  const canvas = useRef<HTMLCanvasElement>(null);
  const [width, setWidth] = useState(600);
  const [drag, setDrag] = useState<{
    axis: number;
    from: number;
    to: number;
  } | null>(null);

  useEffect(() => {
    const node = host.current;
    if (!node) {
      return;
    }
    const measure = () => setWidth(Math.max(320, node.clientWidth));
    measure();
    const observer = new ResizeObserver(measure);
    observer.observe(node);
    return () => observer.disconnect();
  }, []);

  const plotHeight = HEIGHT - TOP - BOTTOM;
  const xOf = (i: number) =>
    axes.length < 2
      ? width / 2
      : SIDE + (i * (width - 2 * SIDE)) / (axes.length - 1);
  const yOf = (position: number) => TOP + (1 - position) * plotHeight;
  const positionOf = (clientY: number, element: HTMLElement) => {
    const box = element.getBoundingClientRect();
    return 1 - (clientY - box.top - PAD) / plotHeight;
  };
  const shown = drag
    ? new Map(brushes).set(drag.axis, brushRange(drag.from, drag.to))
    : brushes;

  useEffect(() => {
    const node = canvas.current;
    if (!node) {
      return;
    }
    const ratio = window.devicePixelRatio || 1;
    node.width = width * ratio;
    node.height = HEIGHT * ratio;
    const context = node.getContext('2d');
    if (!context) {
      return;
    }
    context.setTransform(ratio, 0, 0, ratio, 0, 0);
    context.clearRect(0, 0, width, HEIGHT);
    const style = getComputedStyle(document.body);
    const faded = style.getPropertyValue('--jp-border-color2').trim() || '#bbb';
    const draw = (line: IParallelLine, colour: string, alpha: number) => {
      context.beginPath();
      context.strokeStyle = colour;
      context.globalAlpha = alpha;
      context.lineWidth =
        line.quality !== null && line.quality > 0.99 ? 2.5 : 1.5;
      let started = false;
      line.positions.forEach((p, i) => {
        if (p === null) {
          started = false;
          return;
        }
        if (started) {
          context.lineTo(xOf(i), yOf(p));
        } else {
          context.moveTo(xOf(i), yOf(p));
          started = true;
        }
      });
      context.stroke();
    };
    const inside = lines.filter(line => insideBrushes(line, shown));
    lines
      .filter(line => !inside.includes(line))
      .forEach(line => draw(line, faded, 0.6));
    // Best last, so it is on top.
    [...inside]
      .sort((a, b) => (a.quality ?? -1) - (b.quality ?? -1))
      .forEach(line => draw(line, qualityColour(line.quality), 0.9));
    context.globalAlpha = 1;
  });

  return (
    <figure className="jp-kubelab-Parallel" ref={host}>
      <figcaption>
        {trans.__('Parameters → %1', props.metric)}
        <span className="jp-kubelab-Parallel-scale" aria-hidden="true">
          {trans.__('worst')}
          <span className="jp-kubelab-Parallel-gradient" />
          {trans.__('best')}
        </span>
        {brushes.size ? (
          <button
            className="jp-Button jp-mod-minimal jp-kubelab-Parallel-clear"
            onClick={() => props.onBrush(new Map())}
          >
            {trans.__('Clear filters')}
          </button>
        ) : null}
      </figcaption>
      <div className="jp-kubelab-Parallel-plot" style={{ height: HEIGHT }}>
        <canvas
          ref={canvas}
          style={{ width, height: HEIGHT }}
          role="img"
          aria-label={trans.__(
            '%1 trials across %2 axes',
            lines.length,
            axes.length
          )}
        />
        {axes.map((axis, i) => {
          const brush = shown.get(i);
          return (
            <div
              key={axis.name}
              className="jp-kubelab-Parallel-axis"
              data-axis={axis.name}
              data-kind={axis.kind}
              style={{
                left: xOf(i) - 12,
                top: TOP - PAD,
                height: plotHeight + 2 * PAD
              }}
              title={trans.__(
                'Drag along %1 to keep the trials in a range; click to clear',
                axis.name
              )}
              onPointerDown={event => {
                const at = positionOf(event.clientY, event.currentTarget);
                event.currentTarget.setPointerCapture(event.pointerId);
                setDrag({ axis: i, from: at, to: at });
              }}
              onPointerMove={event => {
                if (drag && drag.axis === i) {
                  const at = positionOf(event.clientY, event.currentTarget);
                  setDrag({ ...drag, to: at });
                }
              }}
              onPointerUp={() => {
                if (!drag || drag.axis !== i) {
                  return;
                }
                const next = new Map(brushes);
                if (Math.abs(drag.to - drag.from) < 0.02) {
                  next.delete(i); // a click: clear this axis
                } else {
                  next.set(i, brushRange(drag.from, drag.to));
                }
                setDrag(null);
                props.onBrush(next);
              }}
            >
              <span
                className="jp-kubelab-Parallel-name"
                style={{ top: -TOP + PAD + 4 }}
              >
                {axis.name}
                {axis.kind === 'log' ? trans.__(' (log)') : ''}
              </span>
              <span className="jp-kubelab-Parallel-rule" />
              {axis.ticks.map(tick => (
                <span
                  key={tick.label}
                  className="jp-kubelab-Parallel-tick"
                  style={{ top: PAD + (1 - tick.at) * plotHeight }}
                >
                  {tick.label}
                </span>
              ))}
              {brush ? (
                <span
                  className="jp-kubelab-Parallel-brush"
                  style={{
                    top: PAD + (1 - brush[1]) * plotHeight,
                    height: (brush[1] - brush[0]) * plotHeight
                  }}
                />
              ) : null}
            </div>
          );
        })}
      </div>
    </figure>
  );
}

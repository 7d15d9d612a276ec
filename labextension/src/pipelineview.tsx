/**
 * A pipeline's graph (dagre's layout, a node per step coloured by its state, a click
 * opening the step's run or sweep) and the main-area view of one pipeline: the graph at
 * full size, its steps as a table, Stop and Resume, following the event stream live.
 * The sidebar (`pipelines.tsx`) shows the same graph scaled to its width.
 */
import { showErrorMessage } from '@jupyterlab/apputils';
import { TranslationBundle } from '@jupyterlab/translation';
import { ReactWidget } from '@jupyterlab/ui-components';
import React, { useEffect, useState } from 'react';

import { createApi } from './connection';
import {
  IPipelineRecord,
  IPipelineStep,
  layout,
  NODE_H,
  fitText,
  NODE_W,
  STEP_COLORS
} from './pipelinegraph';

const TERMINAL = new Set(['succeeded', 'failed', 'stopped']);

export function PipelineGraph(props: {
  pipeline: IPipelineRecord;
  onOpen: (step: IPipelineStep) => void;
  /** Scale down to the container's width (the sidebar) rather than scroll. */
  fit?: boolean;
}): JSX.Element {
  const graph = layout(props.pipeline.steps);
  const at = new Map(graph.nodes.map(p => [p.step.name, p]));
  const width = graph.width + 2;
  const height = graph.height + 2;
  return (
    <svg
      className="jp-kubelab-PipelineGraph"
      width={width}
      height={height}
      viewBox={`0 0 ${width} ${height}`}
      style={props.fit ? { maxWidth: '100%', height: 'auto' } : undefined}
      role="img"
      aria-label={`steps of pipeline ${props.pipeline.name}`}
    >
      <defs>
        <marker
          id="jp-kubelab-arrow"
          viewBox="0 0 8 8"
          refX={8}
          refY={4}
          markerWidth={6}
          markerHeight={6}
          orient="auto"
        >
          <path d="M0,0 L8,4 L0,8 z" fill="var(--jp-border-color1)" />
        </marker>
      </defs>
      {graph.edges.map(edge => (
        <path
          key={`${edge.from}->${edge.to}`}
          className="jp-kubelab-PipelineEdge"
          data-from={edge.from}
          data-to={edge.to}
          d={edge.points
            .map((p, i) => `${i ? 'L' : 'M'}${p.x + 1},${p.y + 1}`)
            .join(' ')}
          fill="none"
          stroke="var(--jp-border-color1)"
          markerEnd={at.has(edge.to) ? 'url(#jp-kubelab-arrow)' : undefined}
        />
      ))}
      {graph.nodes.map(({ step, x, y }) => {
        const ink = step.state === 'waiting' ? '#24292f' : 'white';
        return (
          <g
            key={step.name}
            className="jp-kubelab-PipelineStep"
            data-step={step.name}
            data-state={step.state}
            transform={`translate(${x + 1},${y + 1})`}
            style={{ cursor: step.id ? 'pointer' : 'default' }}
            onClick={() => step.id && props.onOpen(step)}
          >
            <title>
              {`${step.name}: ${step.state}${step.reason ? ` (${step.reason})` : ''}`}
            </title>
            <rect
              width={NODE_W}
              height={NODE_H}
              rx={6}
              fill={STEP_COLORS[step.state] ?? '#6e7781'}
            />
            <text x={8} y={15} fontSize={12} fontWeight="bold" fill={ink}>
              {fitText(step.name, 7.5)}
            </text>
            <text x={8} y={29} fontSize={11} fill={ink}>
              {fitText(
                `${step.kind} · ${step.state}${step.cached ? ' (cached)' : ''}`,
                6.2
              )}
            </text>
          </g>
        );
      })}
    </svg>
  );
}

function PipelineView(props: {
  id: string;
  onOpen: (step: IPipelineStep) => void;
  onName: (name: string) => void;
  trans: TranslationBundle;
}): JSX.Element {
  const { id, trans } = props;
  const [pipeline, setPipeline] = useState<IPipelineRecord | null>(null);
  const [error, setError] = useState<string | null>(null);
  const api = createApi();

  useEffect(() => {
    const stream = api.events({
      onConnect: async signal => {
        // A reconnection reads the record again: what changed while the stream was down.
        const record = await api.pipeline(id, signal);
        setPipeline(record);
        setError(null);
      },
      onEvent: event => {
        if (event.event === 'pipeline') {
          const record = JSON.parse(event.data) as IPipelineRecord;
          if (record.id === id) {
            setPipeline(record);
          }
        }
      },
      onStateChange: state =>
        setError(state.kind === 'waiting' ? state.error : null)
    });
    stream.start();
    return () => void stream.stop();
  }, [id]);

  useEffect(() => {
    if (pipeline) {
      props.onName(pipeline.name);
    }
  }, [pipeline?.name]);

  const act = (action: 'stop' | 'resume') =>
    api
      .pipelineAction(id, action)
      .then(setPipeline, reason =>
        showErrorMessage(
          trans.__('Cannot %1 pipeline %2', action, id),
          reason instanceof Error ? reason.message : String(reason)
        )
      );

  if (!pipeline) {
    return (
      <div className="jp-kubelab-PipelineView">
        {error ?? trans.__('Loading pipeline %1…', id)}
      </div>
    );
  }
  const ended = TERMINAL.has(pipeline.status);
  return (
    <div className="jp-kubelab-PipelineView" data-pipeline-id={pipeline.id}>
      <header>
        <h2>{pipeline.name}</h2>
        <code>{pipeline.id}</code>
        <span
          className="jp-kubelab-PipelineView-status"
          data-status={pipeline.status}
        >
          {pipeline.status}
        </span>
        <button
          className="jp-Button jp-mod-styled jp-mod-reject"
          disabled={ended}
          onClick={() => void act('stop')}
        >
          {trans.__('Stop')}
        </button>
        <button
          className="jp-Button jp-mod-styled"
          disabled={!ended || pipeline.status === 'succeeded'}
          onClick={() => void act('resume')}
        >
          {trans.__('Resume')}
        </button>
      </header>
      {error && <div className="jp-kubelab-Pipelines-error">{error}</div>}
      {pipeline.reason && (
        <p className="jp-kubelab-PipelineView-reason">{pipeline.reason}</p>
      )}
      <div className="jp-kubelab-PipelineView-graph">
        <PipelineGraph pipeline={pipeline} onOpen={props.onOpen} />
      </div>
      <table className="jp-kubelab-PipelineView-steps">
        <thead>
          <tr>
            <th>{trans.__('Step')}</th>
            <th>{trans.__('Kind')}</th>
            <th>{trans.__('State')}</th>
            <th>{trans.__('Attempt')}</th>
            <th>{trans.__('Run or sweep')}</th>
            <th>{trans.__('Reason')}</th>
          </tr>
        </thead>
        <tbody>
          {pipeline.steps.map(step => (
            <tr key={step.name} data-step={step.name}>
              <td>{step.name}</td>
              <td>{step.kind}</td>
              <td data-state={step.state}>{step.state}</td>
              <td>{step.attempt}</td>
              <td>
                {step.id ? (
                  <a
                    href="#"
                    onClick={e => (e.preventDefault(), props.onOpen(step))}
                  >
                    {step.id}
                  </a>
                ) : (
                  '—'
                )}
              </td>
              <td>{step.reason}</td>
            </tr>
          ))}
        </tbody>
      </table>
    </div>
  );
}

/** The main-area content for one pipeline; its title follows the pipeline's name. */
export function pipelineViewContent(options: {
  id: string;
  onOpen: (step: IPipelineStep) => void;
  trans: TranslationBundle;
}): ReactWidget {
  const widget: ReactWidget = ReactWidget.create(
    <PipelineView
      id={options.id}
      onOpen={options.onOpen}
      trans={options.trans}
      onName={name => {
        widget.title.label = options.trans.__('Pipeline %1', name);
      }}
    />
  );
  widget.addClass('jp-kubelab-PipelineViewHost');
  return widget;
}

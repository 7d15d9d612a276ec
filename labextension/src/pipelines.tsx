/**
 * The Pipelines sidebar: pipelines with their steps drawn as a graph (a node per step,
 * coloured by its state, an edge per `depends_on`; clicking a node opens the step's
 * experiment or sweep), and the schedules (live, with their last and next fires; `schedulelist.tsx`). It keeps to itself: its
 * own panel, its own requests to `/kubelab/api/pipelines` and `/schedules`, and its own
 * event-stream connection, of which it reads only `pipeline` events.
 */
import {
  ILabShell,
  JupyterFrontEnd,
  JupyterFrontEndPlugin
} from '@jupyterlab/application';
import { URLExt } from '@jupyterlab/coreutils';
import { ServerConnection } from '@jupyterlab/services';
import {
  ITranslator,
  nullTranslator,
  TranslationBundle
} from '@jupyterlab/translation';
import { ReactWidget, treeViewIcon } from '@jupyterlab/ui-components';
import { ISignal, Signal } from '@lumino/signaling';
import React, { useEffect, useState } from 'react';

// eslint-disable-next-line jupyter/prefer-lazy-imports -- the sidebar is shown at startup
import { EventStream } from './events';
import {
  INodePlace,
  IPipelineRecord,
  IPipelineStep,
  layout,
  NODE_H,
  NODE_W,
  STEP_COLORS
} from './pipelinegraph';
import { kubelabJson, ScheduleList } from './schedulelist';
import { applySchedule, IScheduleRecord, removeSchedule } from './schedules';

export const PIPELINES_SIDEBAR_ID = 'kubelab:pipelines';
const OPEN_EXPERIMENT = 'kubelab:open-experiment';
const OPEN_SWEEP = 'kubelab:open-sweep';
const OPEN_PIPELINE = 'kubelab:open-pipeline';

export function PipelineGraph(props: {
  pipeline: IPipelineRecord;
  onOpen: (step: IPipelineStep) => void;
}): JSX.Element {
  const places = layout(props.pipeline.steps);
  const at = new Map(places.map(p => [p.step.name, p]));
  const width = Math.max(...places.map(p => p.x)) + NODE_W + 2;
  const height = Math.max(...places.map(p => p.y)) + NODE_H + 2;
  return (
    <svg
      className="jp-kubelab-PipelineGraph"
      width={width}
      height={height}
      role="img"
      aria-label={`steps of pipeline ${props.pipeline.name}`}
    >
      {places.flatMap(p =>
        p.step.depends_on
          .map(d => at.get(d))
          .filter((d): d is INodePlace => d !== undefined)
          .map(d => (
            <line
              key={`${d.step.name}->${p.step.name}`}
              x1={d.x + NODE_W}
              y1={d.y + NODE_H / 2}
              x2={p.x}
              y2={p.y + NODE_H / 2}
              stroke="var(--jp-border-color1)"
            />
          ))
      )}
      {places.map(({ step, x, y }) => (
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
          <text
            x={8}
            y={14}
            fontSize={11}
            fontWeight="bold"
            fill={step.state === 'waiting' ? '#24292f' : 'white'}
          >
            {step.name}
          </text>
          <text
            x={8}
            y={27}
            fontSize={10}
            fill={step.state === 'waiting' ? '#24292f' : 'white'}
          >
            {`${step.kind} · ${step.state}${step.cached ? ' (cached)' : ''}`}
          </text>
        </g>
      ))}
    </svg>
  );
}

function PipelinesSection(props: {
  onOpen: (step: IPipelineStep) => void;
  /** Emits a pipeline's id to show (a link, a command). */
  select: ISignal<unknown, string>;
  trans: TranslationBundle;
}): JSX.Element {
  const { trans } = props;
  const [pipelines, setPipelines] = useState<IPipelineRecord[]>([]);
  const [schedules, setSchedules] = useState<IScheduleRecord[]>([]);
  const [selected, setSelected] = useState<string | null>(null);
  const [error, setError] = useState<string | null>(null);

  useEffect(() => {
    const settings = ServerConnection.makeSettings();
    const upsert = (record: IPipelineRecord) =>
      setPipelines(list => {
        const rest = list.filter(p => p.id !== record.id);
        return [record, ...rest].sort((a, b) => (a.id < b.id ? 1 : -1));
      });
    const stream = new EventStream({
      open: signal =>
        ServerConnection.makeRequest(
          URLExt.join(settings.baseUrl, 'kubelab/api/events'),
          { signal },
          settings
        ),
      onConnect: async signal => {
        const [listed, scheduled] = await Promise.all([
          kubelabJson<{ items: IPipelineRecord[] }>('pipelines', { signal }),
          kubelabJson<{ items: IScheduleRecord[] }>('schedules', { signal })
        ]);
        setPipelines(listed.items);
        setSchedules(scheduled.items);
        setError(null);
      },
      onEvent: event => {
        if (event.event === 'pipeline') {
          upsert(JSON.parse(event.data) as IPipelineRecord);
        } else if (event.event === 'schedule') {
          const record = JSON.parse(event.data) as IScheduleRecord;
          setSchedules(list => applySchedule(list, record));
        } else if (event.event === 'schedule_deleted') {
          const { id } = JSON.parse(event.data) as { id: string };
          setSchedules(list => removeSchedule(list, id));
        }
      },
      onStateChange: state =>
        setError(state.kind === 'waiting' ? state.error : null)
    });
    stream.start();
    return () => void stream.stop();
  }, []);

  useEffect(() => {
    const show = (_: unknown, id: string) => setSelected(id);
    props.select.connect(show);
    return () => {
      props.select.disconnect(show);
    };
  }, [props.select]);

  const shown = pipelines.find(p => p.id === selected) ?? pipelines[0];
  return (
    <div className="jp-kubelab-Pipelines">
      {error && <div className="jp-kubelab-Pipelines-error">{error}</div>}
      {pipelines.length === 0 ? (
        <p className="jp-kubelab-Pipelines-empty">
          {trans.__(
            'No pipelines yet: kubelab pipeline run -f FILE, or %pipeline -f FILE in a notebook.'
          )}
        </p>
      ) : (
        <ul className="jp-kubelab-PipelineList">
          {pipelines.map(p => (
            <li
              key={p.id}
              data-pipeline-id={p.id}
              className={p.id === shown?.id ? 'jp-mod-selected' : ''}
              onClick={() => setSelected(p.id)}
            >
              <b>{p.name}</b> <code>{p.id}</code>{' '}
              <span data-status={p.status}>{p.status}</span>
            </li>
          ))}
        </ul>
      )}
      {shown && (
        <div className="jp-kubelab-PipelineDetail">
          <div title={shown.reason}>{shown.reason}</div>
          <PipelineGraph pipeline={shown} onOpen={props.onOpen} />
        </div>
      )}
      <h3>{trans.__('Schedules')}</h3>
      <ScheduleList
        schedules={schedules}
        trans={trans}
        onChanged={record => setSchedules(list => applySchedule(list, record))}
        onRemoved={id => setSchedules(list => removeSchedule(list, id))}
      />
    </div>
  );
}

/** A plugin of its own, registered beside the Experiments sidebar in `index.ts`. */
export const pipelinesPlugin: JupyterFrontEndPlugin<void> = {
  id: 'kubelab:pipelines',
  description:
    'The kubelab Pipelines sidebar: steps as a live graph, schedules.',
  autoStart: true,
  requires: [ILabShell],
  optional: [ITranslator],
  activate: (
    app: JupyterFrontEnd,
    shell: ILabShell,
    translator: ITranslator | null
  ) => {
    const trans = (translator ?? nullTranslator).load('kubelab');
    const open = (step: IPipelineStep) =>
      void app.commands.execute(
        step.kind === 'sweep' ? OPEN_SWEEP : OPEN_EXPERIMENT,
        { id: step.id ?? '' }
      );
    const select = new Signal<unknown, string>({});
    const widget = ReactWidget.create(
      <PipelinesSection onOpen={open} select={select} trans={trans} />
    );
    widget.id = PIPELINES_SIDEBAR_ID;
    widget.title.icon = treeViewIcon;
    widget.title.caption = trans.__('Pipelines');
    widget.addClass('jp-kubelab-PipelinesSidebar');
    shell.add(widget, 'left', { rank: 601 });
    app.commands.addCommand(OPEN_PIPELINE, {
      label: trans.__('Open pipeline'),
      describedBy: {
        args: { type: 'object', properties: { id: { type: 'string' } } }
      },
      execute: args => {
        shell.activateById(widget.id);
        select.emit(String(args.id));
      }
    });
  }
};

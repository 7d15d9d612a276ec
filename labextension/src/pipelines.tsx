/**
 * The Pipelines sidebar: pipelines with the selected one's steps drawn as a graph scaled to
 * the sidebar's width (`pipelineview.tsx`: a node per step coloured by its state, clicking
 * a node opens the step's experiment or sweep; Open shows the pipeline in the main area,
 * a tab the layout restorer brings back), and the schedules (live, with their last and next fires; `schedulelist.tsx`). It keeps to itself: its
 * own panel, its own requests to `/kubelab/api/pipelines` and `/schedules`, and its own
 * event-stream connection, of which it reads only `pipeline` events.
 */
import {
  ILabShell,
  ILayoutRestorer,
  JupyterFrontEnd,
  JupyterFrontEndPlugin
} from '@jupyterlab/application';
import {
  ITranslator,
  nullTranslator,
  TranslationBundle
} from '@jupyterlab/translation';
import { MainAreaWidget, WidgetTracker } from '@jupyterlab/apputils';
import { ReactWidget, treeViewIcon } from '@jupyterlab/ui-components';
import { ISignal, Signal } from '@lumino/signaling';
import React, { useEffect, useState } from 'react';

// eslint-disable-next-line jupyter/prefer-lazy-imports -- the sidebar is shown at startup
import { createApi } from './connection';
import { IPipelineRecord, IPipelineStep } from './pipelinegraph';
// eslint-disable-next-line jupyter/prefer-lazy-imports -- the sidebar draws the graph at startup
import { PipelineGraph, pipelineViewContent } from './pipelineview';
// eslint-disable-next-line jupyter/prefer-lazy-imports -- the sidebar's schedules are shown at startup
import { ScheduleList } from './schedulelist';
import { applySchedule, IScheduleRecord, removeSchedule } from './schedules';

export const PIPELINES_SIDEBAR_ID = 'kubelab:pipelines';
const OPEN_EXPERIMENT = 'kubelab:open-experiment';
const OPEN_SWEEP = 'kubelab:open-sweep';
const OPEN_PIPELINE = 'kubelab:open-pipeline';

function PipelinesSection(props: {
  onOpen: (step: IPipelineStep) => void;
  /** Opens a pipeline's view in the main area. */
  onOpenPipeline: (id: string) => void;
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
    const api = createApi();
    const upsert = (record: IPipelineRecord) =>
      setPipelines(list => {
        const rest = list.filter(p => p.id !== record.id);
        return [record, ...rest].sort((a, b) => (a.id < b.id ? 1 : -1));
      });
    const stream = api.events({
      onConnect: async signal => {
        const [listed, scheduled] = await Promise.all([
          api.pipelines(signal),
          api.schedules(signal)
        ]);
        setPipelines(listed);
        setSchedules(scheduled);
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
              <button
                className="jp-kubelab-PipelineList-open"
                title={trans.__('Open pipeline %1 in the main area', p.name)}
                onClick={event => {
                  event.stopPropagation();
                  props.onOpenPipeline(p.id);
                }}
              >
                {trans.__('Open')}
              </button>
            </li>
          ))}
        </ul>
      )}
      {shown && (
        <div className="jp-kubelab-PipelineDetail">
          <div title={shown.reason}>{shown.reason}</div>
          <PipelineGraph pipeline={shown} onOpen={props.onOpen} fit />
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
  optional: [ITranslator, ILayoutRestorer],
  activate: (
    app: JupyterFrontEnd,
    shell: ILabShell,
    translator: ITranslator | null,
    restorer: ILayoutRestorer | null
  ) => {
    const trans = (translator ?? nullTranslator).load('kubelab');
    const tracker = new WidgetTracker<MainAreaWidget>({
      namespace: 'kubelab-pipeline'
    });
    const openStep = (step: IPipelineStep) =>
      void app.commands.execute(
        step.kind === 'sweep' ? OPEN_SWEEP : OPEN_EXPERIMENT,
        { id: step.id ?? '' }
      );
    const select = new Signal<unknown, string>({});
    const openPipeline = (id: string) =>
      void app.commands.execute(OPEN_PIPELINE, { id });
    const widget = ReactWidget.create(
      <PipelinesSection
        onOpen={openStep}
        onOpenPipeline={openPipeline}
        select={select}
        trans={trans}
      />
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
        const id = String(args.id);
        select.emit(id);
        const viewId = `kubelab-pipeline-view-${id}`;
        const existing = tracker.find(view => view.id === viewId);
        if (existing) {
          shell.activateById(existing.id);
          return;
        }
        const view = new MainAreaWidget({
          content: pipelineViewContent({ id, onOpen: openStep, trans })
        });
        view.id = viewId;
        view.title.label = trans.__('Pipeline %1', id);
        view.title.icon = treeViewIcon;
        view.title.closable = true;
        view.title.className = 'jp-kubelab-Tab';
        shell.add(view, 'main');
        void tracker.add(view);
        shell.activateById(view.id);
      }
    });
    // A reload opens each pipeline tab again.
    void restorer?.restore(tracker, {
      command: OPEN_PIPELINE,
      args: view => ({ id: view.id.replace('kubelab-pipeline-view-', '') }),
      name: view => view.id
    });
  }
};

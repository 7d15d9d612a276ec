/**
 * The left sidebar: Experiments, Sweeps, Services, TensorBoards and Resources as the sections of a
 * JupyterLab `SidePanel` (collapsible and resizable like the debugger's). Every section
 * renders from the shared `LiveStore` and re-renders on its `changed` signal.
 */
import { TranslationBundle } from '@jupyterlab/translation';
import {
  CommandToolbarButton,
  LabIcon,
  ReactWidget,
  SidePanel,
  UseSignal
} from '@jupyterlab/ui-components';
import { CommandRegistry } from '@lumino/commands';
import { ISignal } from '@lumino/signaling';
import { AccordionPanel, Menu } from '@lumino/widgets';
import React, { useEffect, useState } from 'react';

import { IResources } from './api';
import { StreamState } from './events';
import { formatNumber } from './model';
import { IKubelabSettings } from './settings';
import { MyUsage } from './myusage';
import { PreemptionPreview } from './preemptionpreview';
import { ItemList, RowAction } from './sidebarlist';
import { ServiceList } from './servicelist';
import { LiveStore } from './store';
import { formatBest, formatProgress, progressFraction } from './sweeps';
import { ExperimentTable, QueryBox } from './table';

export const SIDEBAR_ID = 'kubelab:sidebar';

export const CommandIDs = {
  openSidebar: 'kubelab:open-sidebar',
  openExperiment: 'kubelab:open-experiment',
  logs: 'kubelab:experiment-logs',
  stop: 'kubelab:stop-experiment',
  resume: 'kubelab:resume-experiment',
  diff: 'kubelab:diff-runs',
  rerun: 'kubelab:rerun-experiment',
  experimentTensorBoard: 'kubelab:experiment-tensorboard',
  openRunDir: 'kubelab:open-run-dir',
  remove: 'kubelab:delete-experiment',
  openSweep: 'kubelab:open-sweep',
  stopSweep: 'kubelab:stop-sweep',
  resumeSweep: 'kubelab:resume-sweep',
  runAsSweep: 'kubelab:run-as-sweep',
  runFileAsSweep: 'kubelab:run-file-as-sweep',
  openTensorBoard: 'kubelab:open-tensorboard',
  stopTensorBoard: 'kubelab:stop-tensorboard',
  runAsExperiment: 'kubelab:run-as-experiment',
  runFile: 'kubelab:run-file-as-experiment',
  runSpec: 'kubelab:run-spec-file',
  refresh: 'kubelab:refresh',
  projectTensorBoard: 'kubelab:project-tensorboard',
  compare: 'kubelab:compare-runs',
  openPipeline: 'kubelab:open-pipeline',
  openLink: 'kubelab:open-link',
  copyLink: 'kubelab:copy-link'
} as const;

/** The actions of an experiment row, in menu order. */
export const ROW_ACTIONS = [
  CommandIDs.openExperiment,
  CommandIDs.logs,
  CommandIDs.stop,
  CommandIDs.resume,
  CommandIDs.rerun,
  CommandIDs.experimentTensorBoard,
  CommandIDs.openRunDir,
  CommandIDs.remove
];

export interface ISettingsSource {
  readonly value: IKubelabSettings;
  readonly changed: ISignal<unknown, IKubelabSettings>;
}

export interface IPanelOptions {
  store: LiveStore;
  commands: CommandRegistry;
  settings: ISettingsSource;
  icon: LabIcon;
  trans: TranslationBundle;
}

/** Build the sidebar widget with its five sections. */
export function createSidebar(options: IPanelOptions): SidePanel {
  const { store, trans } = options;
  const panel = new SidePanel();
  panel.id = SIDEBAR_ID;
  panel.addClass('jp-kubelab-Sidebar');
  panel.title.icon = options.icon;
  panel.title.caption = trans.__('Experiments');
  panel.header.addWidget(
    ReactWidget.create(
      <UseSignal signal={store.changed}>
        {() => (
          <header className="jp-kubelab-Sidebar-header">
            <h2 className="jp-kubelab-Sidebar-title">
              {trans.__('Experiments')}
            </h2>
            <StreamIndicator state={store.stream} trans={trans} />
          </header>
        )}
      </UseSignal>
    )
  );
  panel.toolbar.addItem(
    'run',
    new CommandToolbarButton({
      commands: options.commands,
      id: CommandIDs.runAsExperiment,
      label: trans.__('Run')
    })
  );
  panel.toolbar.addItem(
    'sweep',
    new CommandToolbarButton({
      commands: options.commands,
      id: CommandIDs.runAsSweep,
      label: trans.__('Sweep')
    })
  );
  panel.toolbar.addItem(
    'compare',
    new CommandToolbarButton({
      commands: options.commands,
      id: CommandIDs.compare,
      label: trans.__('Compare')
    })
  );
  const section = (
    label: string,
    className: string,
    body: () => JSX.Element
  ) => {
    const widget = ReactWidget.create(
      <UseSignal signal={store.changed}>{body}</UseSignal>
    );
    widget.title.label = label;
    widget.addClass(className);
    panel.addWidget(widget);
    return widget;
  };
  section(trans.__('Experiments'), 'jp-kubelab-ExperimentsSection', () => (
    <ExperimentsSection {...options} />
  ));
  section(trans.__('Sweeps'), 'jp-kubelab-SweepsSection', () => (
    <SweepsSection {...options} />
  ));
  section(trans.__('Services'), 'jp-kubelab-ServicesSection', () => (
    <ServiceList
      services={store.services}
      commands={options.commands}
      trans={trans}
    />
  ));
  section(trans.__('TensorBoards'), 'jp-kubelab-TensorBoardsSection', () => (
    <TensorBoardsSection {...options} />
  ));
  section(trans.__('Resources'), 'jp-kubelab-ResourcesSection', () => (
    <ResourcesSection {...options} />
  ));
  // The table needs the room; the other sections start small.
  requestAnimationFrame(() =>
    (panel.content as AccordionPanel).setRelativeSizes([5, 2, 2, 1, 2])
  );
  return panel;
}

function ExperimentsSection(props: IPanelOptions): JSX.Element {
  const { store, commands, trans } = props;
  const [settings, setSettings] = useState(props.settings.value);
  useEffect(() => {
    const update = (_: unknown, value: IKubelabSettings) => setSettings(value);
    props.settings.changed.connect(update);
    return () => {
      props.settings.changed.disconnect(update);
    };
  }, [props.settings]);
  const rows = store.table.rows;
  const now = useNow(rows.some(row => row.status === 'Running'));
  const openMenu = (id: string, x: number, y: number) => {
    const menu = new Menu({ commands });
    menu.addClass('jp-kubelab-RowMenu');
    for (const command of ROW_ACTIONS) {
      menu.addItem({ command, args: { id } });
    }
    menu.open(x, y);
    // Keyboard users land on the first action, as in JupyterLab's own menus.
    menu.activeIndex = 0;
  };
  return (
    <div className="jp-kubelab-Experiments">
      <QueryBox
        value={store.query}
        error={store.queryError}
        trans={trans}
        onQuery={query => void store.setQuery(query)}
      />
      {rows.length === 0 ? (
        <p className="jp-kubelab-Sidebar-empty">
          {store.query
            ? trans.__('No experiment matches this filter.')
            : trans.__(
                'No experiments yet. Right-click a .py or .ipynb file and choose Run as experiment, or use %1 in a notebook.',
                '%%train'
              )}
        </p>
      ) : (
        <ExperimentTable
          rows={rows}
          columns={settings.columns}
          sort={store.table.sort}
          now={now}
          trans={trans}
          onSort={sort => store.setSort(sort)}
          onOpen={id =>
            void commands.execute(CommandIDs.openExperiment, { id })
          }
          onMenu={openMenu}
        />
      )}
    </div>
  );
}

function SweepsSection({ store, commands, trans }: IPanelOptions): JSX.Element {
  if (store.sweeps.length === 0) {
    return (
      <p className="jp-kubelab-Sidebar-empty">
        {trans.__(
          'No sweeps yet. Start one from a notebook cell with %1, or with %2 or %3.',
          '%%train --sweep space.json',
          '%sweep -f config.yml',
          'kubelab sweep'
        )}
      </p>
    );
  }
  return (
    <ul className="jp-kubelab-List">
      {store.sweeps.map(sweep => {
        const fraction = progressFraction(sweep);
        const interrupted = sweep.counts.interrupted ?? 0;
        return (
          <li
            key={sweep.id}
            className="jp-kubelab-Sweep"
            data-sweep-id={sweep.id}
            data-status={sweep.status}
            onClick={() =>
              void commands.execute(CommandIDs.openSweep, { id: sweep.id })
            }
            title={sweep.reason}
          >
            <div className="jp-kubelab-Sweep-line">
              <span className="jp-kubelab-Sweep-name">{sweep.name}</span>
              <span
                className={`jp-kubelab-StatusDot jp-kubelab-StatusDot-${sweep.status.toLowerCase()}`}
              />
              <span className="jp-kubelab-Sweep-status">{sweep.status}</span>
              <span className="jp-kubelab-Sweep-progress jp-kubelab-Number">
                {formatProgress(sweep)}
              </span>
            </div>
            {interrupted > 0 && (
              <div
                className="jp-kubelab-Sweep-interrupted"
                title={trans.__(
                  'Stopped with the sweep; they do not count toward its budget, and Resume runs them again.'
                )}
              >
                {trans._n(
                  '%1 trial interrupted',
                  '%1 trials interrupted',
                  interrupted
                )}
              </div>
            )}
            {fraction === null ? null : (
              <div className="jp-kubelab-Bar" aria-hidden="true">
                <div style={{ width: `${fraction * 100}%` }} />
              </div>
            )}
            <div className="jp-kubelab-Sweep-best">
              {sweep.best
                ? trans.__(
                    'best %1 %2 (trial #%3)',
                    sweep.objective.metric,
                    formatNumber(sweep.best.value),
                    sweep.best.trial
                  )
                : formatBest(sweep)}
            </div>
          </li>
        );
      })}
    </ul>
  );
}

function TensorBoardsSection({
  store,
  commands,
  trans
}: IPanelOptions): JSX.Element {
  return (
    <ItemList
      items={store.tensorboards}
      className="jp-kubelab-List"
      emptyClassName="jp-kubelab-Sidebar-empty"
      empty={trans.__(
        'No TensorBoard running. Open one from an experiment or sweep.'
      )}
    >
      {session => {
        const names = Object.keys(session.logdirs);
        return (
          <li
            key={session.id}
            className="jp-kubelab-TensorBoard"
            data-tensorboard-id={session.id}
            data-state={session.state}
          >
            <div className="jp-kubelab-TensorBoard-line">
              <span
                className="jp-kubelab-TensorBoard-name"
                title={names.join(', ')}
              >
                {names.length === 1
                  ? names[0]
                  : trans.__('%1 runs', names.length)}
              </span>
              <span
                className="jp-kubelab-TensorBoard-state"
                title={session.reason ?? ''}
              >
                {session.state}
              </span>
              <RowAction
                className="jp-kubelab-TensorBoard-open"
                label={trans.__('Open')}
                onClick={() =>
                  commands.execute(CommandIDs.openTensorBoard, {
                    id: session.id,
                    url: session.url
                  })
                }
              />
              {session.state === 'running' || session.state === 'starting' ? (
                <RowAction
                  className="jp-kubelab-TensorBoard-stop"
                  label={trans.__('Stop')}
                  onClick={() =>
                    commands.execute(CommandIDs.stopTensorBoard, {
                      id: session.id
                    })
                  }
                />
              ) : null}
            </div>
          </li>
        );
      }}
    </ItemList>
  );
}

function ResourcesSection({ store, trans }: IPanelOptions): JSX.Element {
  const resources = store.resources;
  const waiting = store.table.rows.filter(
    row =>
      row.status === 'Queued' ||
      row.status === 'Pending' ||
      row.status === 'Preempted'
  );
  return (
    <div className="jp-kubelab-Resources">
      <ResourceSummary resources={resources} trans={trans} />
      <MyUsage store={store} trans={trans} />
      {resources?.gpus.types.map(type => (
        <div
          key={type.name}
          className="jp-kubelab-GpuType"
          data-gpu-type={type.name}
        >
          <span className="jp-kubelab-GpuType-name">{type.name}</span>
          {type.total !== null && type.free !== null ? (
            <>
              <div className="jp-kubelab-Bar" aria-hidden="true">
                <div
                  style={{
                    width: `${type.total ? ((type.total - type.free) / type.total) * 100 : 0}%`
                  }}
                />
              </div>
              <span className="jp-kubelab-GpuType-free jp-kubelab-Number">
                {trans.__('%1/%2 free', type.free, type.total)}
              </span>
            </>
          ) : null}
        </div>
      ))}
      <h3 className="jp-kubelab-Resources-heading">
        {trans.__('Waiting (%1)', waiting.length)}
      </h3>
      {waiting.length === 0 ? (
        <p className="jp-kubelab-Sidebar-empty">
          {trans.__('Nothing is waiting.')}
        </p>
      ) : (
        <ul className="jp-kubelab-List">
          {waiting.map(row => (
            <li
              key={row.id}
              className="jp-kubelab-Waiting"
              data-experiment-id={row.id}
            >
              <span className="jp-kubelab-Waiting-name">{row.name}</span>
              <span className="jp-kubelab-Waiting-reason">
                {row.status}: {row.reason}
              </span>
            </li>
          ))}
        </ul>
      )}
      <PreemptionPreview store={store} trans={trans} />
    </div>
  );
}

/** The current time, ticking each second only while some run is running. */
function useNow(ticking: boolean): number {
  const [now, setNow] = useState(() => Date.now());
  useEffect(() => {
    if (!ticking) {
      return;
    }
    setNow(Date.now());
    const timer = setInterval(() => setNow(Date.now()), 1000);
    return () => clearInterval(timer);
  }, [ticking]);
  return now;
}

export function ResourceSummary(props: {
  resources: IResources | null;
  trans: TranslationBundle;
}): JSX.Element {
  const { resources, trans } = props;
  if (!resources) {
    return (
      <div className="jp-kubelab-Sidebar-resources">
        {trans.__('Backend: …')}
      </div>
    );
  }
  const { backend, gpus } = resources;
  const gpuText =
    gpus.total === 0
      ? trans.__('no GPUs')
      : trans._n(
          '%2 of %1 GPU free',
          '%2 of %1 GPUs free',
          gpus.total,
          gpus.free
        );
  return (
    <div className="jp-kubelab-Sidebar-resources" data-backend={backend}>
      {trans.__('Backend: %1 · %2', backend, gpuText)}
    </div>
  );
}

function StreamIndicator(props: {
  state: StreamState;
  trans: TranslationBundle;
}): JSX.Element {
  const { state, trans } = props;
  const text =
    state.kind === 'live'
      ? trans.__('Live')
      : state.kind === 'waiting'
        ? trans.__('Reconnecting in %1 s', Math.ceil(state.retryInMs / 1000))
        : state.kind === 'connecting'
          ? trans.__('Connecting…')
          : trans.__('Stopped');
  return (
    <div
      className={`jp-kubelab-Stream jp-kubelab-Stream-${state.kind}`}
      data-stream-state={state.kind}
      title={state.kind === 'waiting' ? state.error : text}
    >
      {text}
    </div>
  );
}

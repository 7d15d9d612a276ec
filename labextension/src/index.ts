/**
 * The kubelab JupyterLab plugin: the Experiments sidebar, the main-area views
 * (experiment, sweep, TensorBoard), the "Run as experiment" entry points (notebook
 * toolbar, command palette, file browser) and the settings.
 */
import {
  ILabShell,
  ILayoutRestorer,
  IRouter,
  JupyterFrontEnd,
  JupyterFrontEndPlugin
} from '@jupyterlab/application';
import {
  Dialog,
  Clipboard,
  ICommandPalette,
  InputDialog,
  MainAreaWidget,
  Notification,
  showDialog,
  showErrorMessage,
  WidgetTracker
} from '@jupyterlab/apputils';
import { PageConfig, URLExt } from '@jupyterlab/coreutils';
import { IDocumentWidget } from '@jupyterlab/docregistry';
import { IDefaultFileBrowser } from '@jupyterlab/filebrowser';
import { ISettingRegistry } from '@jupyterlab/settingregistry';
import { ITranslator, nullTranslator } from '@jupyterlab/translation';
import { LabIcon } from '@jupyterlab/ui-components';
import { Signal } from '@lumino/signaling';

import experimentsSvg from '../style/icons/experiments.svg';
// eslint-disable-next-line jupyter/prefer-lazy-imports -- the sidebar is shown at startup
import {
  IExperimentDetail,
  IOutputFile,
  KubelabApi,
  sessionEnded
} from './api';
// eslint-disable-next-line jupyter/prefer-lazy-imports -- opened from the sidebar
import { CompareView } from './compareview';
// eslint-disable-next-line jupyter/prefer-lazy-imports -- the sidebar is shown at startup
import { createApi } from './connection';
// eslint-disable-next-line jupyter/prefer-lazy-imports -- the sidebar is shown at startup
import { runDialog } from './dialog';
// eslint-disable-next-line jupyter/prefer-lazy-imports -- opened from Compare
import { diffViewContent } from './diffview';
// eslint-disable-next-line jupyter/prefer-lazy-imports -- the sidebar is shown at startup
import { ExperimentView } from './experimentview';
// eslint-disable-next-line jupyter/prefer-lazy-imports -- the sidebar is shown at startup
import {
  commandFor,
  defaultForm,
  formFromSpec,
  parametersCellSource,
  paramsFromParametersCell
} from './form';
// eslint-disable-next-line jupyter/prefer-lazy-imports -- isEnabled must answer synchronously
import { TERMINAL_STATES } from './model';
import {
  ILink,
  LINK_PATTERN,
  linkQuery,
  parseLink,
  withoutLink
} from './links';
import { CommandIDs, createSidebar, ROW_ACTIONS, SIDEBAR_ID } from './panel';
import { idleNoticePlugin } from './idlenoticeplugin';
import { pipelinesPlugin } from './pipelines';
// eslint-disable-next-line jupyter/prefer-lazy-imports -- the sidebar's services are shown at startup
import { addServiceCommands } from './servicecommands';
// eslint-disable-next-line jupyter/prefer-lazy-imports -- the sidebar's services are shown at startup
import { ServiceCommandIDs } from './servicelist';
// eslint-disable-next-line jupyter/prefer-lazy-imports -- the sidebar is shown at startup
import { DEFAULT_SETTINGS, IKubelabSettings, readSettings } from './settings';
// eslint-disable-next-line jupyter/prefer-lazy-imports -- the sidebar is shown at startup
import { reportFailure } from './sidebarlist';
// eslint-disable-next-line jupyter/prefer-lazy-imports -- the sidebar is shown at startup
import { LiveStore } from './store';
// eslint-disable-next-line jupyter/prefer-lazy-imports -- the sidebar is shown at startup
import { sweepDialog } from './sweepdialog';
// eslint-disable-next-line jupyter/prefer-lazy-imports -- the sidebar's Sweep button is shown at startup
import { defaultSweepForm } from './sweepform';
// eslint-disable-next-line jupyter/prefer-lazy-imports -- the sidebar is shown at startup
import { SweepView } from './sweepview';
// eslint-disable-next-line jupyter/prefer-lazy-imports -- opened from the sidebar
import { tensorBoardTab } from './tensorboardtab';
import { RUN_FILES } from './vocabulary';

export const OPEN_SIDEBAR_COMMAND = CommandIDs.openSidebar;
const PLUGIN_ID = 'kubelab:plugin';

export const experimentsIcon = new LabIcon({
  name: 'kubelab:experiments',
  svgstr: experimentsSvg
});

/** Settings as a value plus a change signal, for the sidebar's columns. */
class SettingsSource {
  value: IKubelabSettings = DEFAULT_SETTINGS;
  readonly changed = new Signal<this, IKubelabSettings>(this);

  set(value: IKubelabSettings): void {
    this.value = value;
    this.changed.emit(value);
  }
}

const NO_ARGS = { args: { type: 'object', properties: {} } };
const ID_ARGS = {
  args: {
    type: 'object',
    properties: {
      id: { type: 'string', description: 'experiment or sweep id' },
      name: {
        type: 'string',
        description: 'its name, if the sidebar may not know it yet'
      }
    }
  }
};

const RUNNABLE = /\.(py|ipynb)$/;
const SPEC_FILE = /\.ya?ml$/;

const plugin: JupyterFrontEndPlugin<void> = {
  id: PLUGIN_ID,
  description:
    'The kubelab Experiments sidebar: experiments, sweeps, TensorBoard and GPUs, live.',
  autoStart: true,
  requires: [ILabShell],
  optional: [
    ICommandPalette,
    ILayoutRestorer,
    ITranslator,
    ISettingRegistry,
    IDefaultFileBrowser,
    IRouter
  ],
  activate: (
    app: JupyterFrontEnd,
    shell: ILabShell,
    palette: ICommandPalette | null,
    restorer: ILayoutRestorer | null,
    translator: ITranslator | null,
    registry: ISettingRegistry | null,
    browser: IDefaultFileBrowser | null,
    router: IRouter | null
  ) => {
    const trans = (translator ?? nullTranslator).load('kubelab');
    const api = createApi();
    const store = new LiveStore(api);
    const settings = new SettingsSource();
    const { commands } = app;
    store.start();

    if (registry) {
      registry
        .load(PLUGIN_ID)
        .then(loaded => {
          const apply = () =>
            settings.set(
              readSettings(loaded.composite as Record<string, unknown>)
            );
          apply();
          loaded.changed.connect(apply);
        })
        .catch(reason =>
          console.warn('kubelab: could not load the settings', reason)
        );
    }

    const sidebar = createSidebar({
      store,
      commands,
      settings,
      icon: experimentsIcon,
      trans
    });
    shell.add(sidebar, 'left', { rank: 600 });
    restorer?.add(sidebar, SIDEBAR_ID);

    // Each kind of view has a tracker the layout restorer reads: a reload opens every
    // kubelab tab again with the command (and arguments) that opened it.
    const restoreArgs = new WeakMap<
      MainAreaWidget,
      Record<string, string | string[]>
    >();
    const links = new WeakMap<MainAreaWidget, ILink>();
    const tracker = (namespace: string, command: string) => {
      const made = new WidgetTracker<MainAreaWidget>({ namespace });
      void restorer?.restore(made, {
        command,
        args: widget => ({ ...restoreArgs.get(widget) }),
        name: widget => widget.id
      });
      return made;
    };
    const trackers = {
      experiment: tracker('kubelab-experiment', CommandIDs.openExperiment),
      sweep: tracker('kubelab-sweep', CommandIDs.openSweep),
      compare: tracker('kubelab-compare', CommandIDs.compare),
      diff: tracker('kubelab-diff', CommandIDs.diff),
      tensorboard: tracker('kubelab-tensorboard', CommandIDs.openTensorBoard),
      service: tracker('kubelab-service', ServiceCommandIDs.tryService)
    };
    const views = new Map<string, MainAreaWidget>();
    const showView = (
      key: string,
      make: () => MainAreaWidget,
      kind: keyof typeof trackers,
      args: Record<string, string | string[]>,
      link?: ILink
    ) => {
      let view = views.get(key);
      if (!view || view.isDisposed) {
        view = make();
        views.set(key, view);
        view.disposed.connect(() => views.delete(key));
        view.title.className = 'jp-kubelab-Tab';
        restoreArgs.set(view, args);
        if (link) {
          links.set(view, link);
        }
        shell.add(view, 'main');
        void trackers[kind].add(view);
      }
      shell.activateById(view.id);
      return view;
    };
    const idOf = (args: Record<string, unknown>): string => {
      if (typeof args.id === 'string') {
        return args.id;
      }
      const node = app.contextMenuHitTest(
        element => !!element.dataset.experimentId
      );
      return node?.dataset.experimentId ?? '';
    };
    const nameOf = (id: string) => store.experiment(id)?.name ?? id;
    const fail = reportFailure;

    const openExperiment = (id: string, focus?: 'logs') =>
      showView(
        `experiment:${id}`,
        () => {
          const content = new ExperimentView({
            id,
            store,
            api,
            commands,
            trans,
            focus,
            openOutput: (detail, file) =>
              void openOutput(app, api, detail, file).catch(
                fail(trans.__('Cannot open %1', file.path))
              )
          });
          const view = new MainAreaWidget({ content });
          view.id = `kubelab-experiment-view-${id}`;
          const record = store.experiment(id);
          view.title.label =
            record?.sweep && record.trial !== null && record.trial !== undefined
              ? trans.__('Trial #%1 · %2', record.trial, record.name)
              : nameOf(id);
          view.title.caption = trans.__('Experiment %1', id);
          view.title.icon = experimentsIcon;
          view.title.closable = true;
          return view;
        },
        'experiment',
        { id },
        { kind: 'run', ids: [id] }
      );

    commands.addCommand(CommandIDs.openSidebar, {
      label: trans.__('Open the Experiments sidebar'),
      caption: trans.__('Show kubelab experiments with their live status'),
      icon: experimentsIcon,
      describedBy: NO_ARGS,
      execute: () => shell.activateById(sidebar.id)
    });
    commands.addCommand(CommandIDs.openExperiment, {
      describedBy: ID_ARGS,
      label: trans.__('Open'),
      caption: trans.__('Parameters, live metrics, logs and timeline'),
      execute: args => void openExperiment(idOf(args))
    });
    commands.addCommand(CommandIDs.logs, {
      describedBy: ID_ARGS,
      label: trans.__('Show logs'),
      execute: args => void openExperiment(idOf(args), 'logs')
    });
    commands.addCommand(CommandIDs.stop, {
      describedBy: ID_ARGS,
      label: trans.__('Stop'),
      isEnabled: args => {
        const record = store.experiment(idOf(args));
        return !record || !TERMINAL_STATES.has(record.status);
      },
      execute: args =>
        api.stop(idOf(args)).catch(fail(trans.__('Cannot stop the experiment')))
    });
    commands.addCommand(CommandIDs.resume, {
      describedBy: ID_ARGS,
      label: trans.__('Resume from checkpoint'),
      caption: trans.__(
        'Start this stopped run again, as the same run, from its latest checkpoint'
      ),
      isVisible: args => store.experiment(idOf(args))?.status === 'Stopped',
      execute: args =>
        api
          .resume(idOf(args))
          .catch(fail(trans.__('Cannot resume the experiment')))
    });
    commands.addCommand(CommandIDs.rerun, {
      describedBy: ID_ARGS,
      label: trans.__('Re-run with changes…'),
      execute: async args => {
        const id = idOf(args);
        try {
          const detail = await api.experiment(id);
          const record = await runDialog({
            api,
            trans,
            title: trans.__('Re-run %1', detail.name),
            subject: trans.__('a copy of %1 (%2)', detail.name, id),
            initial: formFromSpec(detail.spec),
            base: detail.spec,
            cwd: '',
            resources: store.resources
          });
          if (record) {
            void openExperiment(record.id);
          }
        } catch (reason) {
          await fail(trans.__('Cannot re-run the experiment'))(reason);
        }
      }
    });
    commands.addCommand(CommandIDs.experimentTensorBoard, {
      describedBy: ID_ARGS,
      label: trans.__('Open TensorBoard'),
      execute: args =>
        api
          .startTensorBoard({ experiments: [idOf(args)] })
          .then(session =>
            commands.execute(CommandIDs.openTensorBoard, {
              id: session.id,
              url: session.url
            })
          )
          .catch(fail(trans.__('Cannot start TensorBoard')))
    });
    commands.addCommand(CommandIDs.openRunDir, {
      describedBy: ID_ARGS,
      label: trans.__('Open run directory'),
      execute: async args => {
        const detail = await api.experiment(idOf(args));
        if (detail.run_dir_relative === null) {
          await showErrorMessage(
            trans.__('Outside the file browser'),
            trans.__(
              'The run directory %1 is outside the folder the file browser shows (or hidden).',
              detail.run_dir
            )
          );
          return;
        }
        await commands.execute('filebrowser:go-to-path', {
          path: detail.run_dir_relative
        });
      }
    });
    commands.addCommand(CommandIDs.remove, {
      describedBy: ID_ARGS,
      label: trans.__('Delete…'),
      execute: async args => {
        const id = idOf(args);
        const answer = await showDialog({
          title: trans.__('Delete %1?', nameOf(id)),
          body: trans.__(
            'This stops the experiment if it runs and deletes its run directory (logs, metrics, outputs).'
          ),
          buttons: [
            Dialog.cancelButton(),
            Dialog.warnButton({ label: trans.__('Delete') })
          ]
        });
        if (answer.button.accept) {
          await api.remove(id).catch(fail(trans.__('Cannot delete')));
        }
      }
    });
    commands.addCommand(CommandIDs.openSweep, {
      describedBy: ID_ARGS,
      label: trans.__('Open sweep'),
      execute: args => {
        const id = String(args.id);
        const name =
          store.sweeps.find(s => s.id === id)?.name ??
          (typeof args.name === 'string' ? args.name : id);
        showView(
          `sweep:${id}`,
          () => {
            const view = new MainAreaWidget({
              content: new SweepView({ id, store, api, commands, trans })
            });
            view.id = `kubelab-sweep-view-${id}`;
            view.title.label = trans.__('Sweep %1', name);
            view.title.icon = experimentsIcon;
            view.title.closable = true;
            return view;
          },
          'sweep',
          { id, name },
          { kind: 'sweep', ids: [id] }
        );
      }
    });
    commands.addCommand(CommandIDs.stopSweep, {
      describedBy: ID_ARGS,
      label: trans.__('Stop sweep'),
      execute: args =>
        api
          .stopSweep(String(args.id))
          .catch(fail(trans.__('Cannot stop the sweep')))
    });
    commands.addCommand(CommandIDs.resumeSweep, {
      describedBy: ID_ARGS,
      label: trans.__('Resume sweep…'),
      execute: async args => {
        const id = String(args.id);
        const sweep = store.sweeps.find(s => s.id === id);
        const answer = await InputDialog.getNumber({
          title: trans.__('Resume %1', sweep?.name ?? id),
          label: trans.__('Max trials (raise it to run more)'),
          value: sweep?.max_trials ?? 0,
          okLabel: trans.__('Resume')
        });
        if (!answer.button.accept) {
          return;
        }
        const budget =
          answer.value && answer.value !== sweep?.max_trials
            ? { max_trials: answer.value }
            : {};
        await api
          .resumeSweep(id, budget)
          .catch(fail(trans.__('Cannot resume the sweep')));
      }
    });
    commands.addCommand(CommandIDs.openTensorBoard, {
      label: trans.__('Open TensorBoard'),
      describedBy: {
        args: {
          type: 'object',
          properties: { id: { type: 'string' }, url: { type: 'string' } },
          required: ['id', 'url']
        }
      },
      execute: async args => {
        let id = String(args.id);
        let url = String(args.url);
        await store.ready; // a restored tab's session may have ended meanwhile
        const known = store.tensorboards.find(s => s.id === id);
        if (known?.source && sessionEnded(store.tensorboards, id)) {
          // Opening a stopped session starts it again, visibly (a new session).
          try {
            const session = await api.startTensorBoard(
              known.source as Record<string, unknown>
            );
            ({ id, url } = session);
          } catch (reason) {
            await fail(trans.__('Cannot start TensorBoard'))(reason);
            return;
          }
        }
        showView(
          `tensorboard:${id}`,
          () =>
            tensorBoardTab({
              id,
              url,
              store,
              api,
              trans,
              icon: experimentsIcon,
              onStopError: fail(trans.__('Cannot stop TensorBoard'))
            }),
          'tensorboard',
          { id, url }
        );
      }
    });
    addServiceCommands({
      commands,
      store,
      api,
      trans,
      icon: experimentsIcon,
      show: (key, make, args) => showView(key, make, 'service', args),
      fail
    });
    commands.addCommand(CommandIDs.stopTensorBoard, {
      describedBy: ID_ARGS,
      label: trans.__('Stop TensorBoard'),
      execute: args =>
        api
          .stopTensorBoard(String(args.id))
          .catch(fail(trans.__('Cannot stop TensorBoard')))
    });

    commands.addCommand(CommandIDs.compare, {
      label: trans.__('Compare runs'),
      caption: trans.__(
        'Overlay the curves of several runs and compare their metrics and parameters'
      ),
      icon: experimentsIcon,
      describedBy: {
        args: {
          type: 'object',
          properties: { ids: { type: 'array', items: { type: 'string' } } }
        }
      },
      execute: args => {
        const ids = Array.isArray(args.ids) ? args.ids.map(String) : [];
        // The same comparison asked again (the same click) comes back to its tab.
        const key = `compare:${[...ids].sort().join(',')}`;
        showView(
          key,
          () => {
            const view: MainAreaWidget = new MainAreaWidget({
              content: new CompareView({
                store,
                api,
                commands,
                trans,
                ids,
                onSelection: selected => {
                  // A reload and a link bring back what is ticked now.
                  restoreArgs.set(view, { ids: [...selected] });
                  links.set(view, { kind: 'compare', ids: [...selected] });
                  void trackers.compare.save(view);
                }
              })
            });
            view.id = `kubelab-compare-${++compareViews}`;
            view.title.label = trans.__('Compare runs');
            view.title.icon = experimentsIcon;
            view.title.closable = true;
            return view;
          },
          'compare',
          { ids },
          { kind: 'compare', ids }
        );
      }
    });
    let compareViews = 0;
    commands.addCommand(CommandIDs.diff, {
      label: trans.__('Diff two runs'),
      caption: trans.__(
        'What differs between two runs: parameters, metrics, environment and code'
      ),
      icon: experimentsIcon,
      describedBy: {
        args: {
          type: 'object',
          properties: { a: { type: 'string' }, b: { type: 'string' } },
          required: ['a', 'b']
        }
      },
      execute: args => {
        const a = String(args.a);
        const b = String(args.b);
        showView(
          `diff:${a}:${b}`,
          () => {
            const view = new MainAreaWidget({
              content: diffViewContent({ a, b, trans })
            });
            view.id = `kubelab-diff-${a}-${b}`;
            view.title.label = trans.__('Diff %1 · %2', nameOf(a), nameOf(b));
            view.title.icon = experimentsIcon;
            view.title.closable = true;
            return view;
          },
          'diff',
          { a, b },
          { kind: 'diff', ids: [a, b] }
        );
      }
    });
    const openLink = (link: ILink) => {
      switch (link.kind) {
        case 'run':
          return commands.execute(CommandIDs.openExperiment, {
            id: link.ids[0]
          });
        case 'sweep':
          return commands.execute(CommandIDs.openSweep, { id: link.ids[0] });
        case 'pipeline':
          return commands.execute(CommandIDs.openPipeline, {
            id: link.ids[0]
          });
        case 'compare':
          return commands.execute(CommandIDs.compare, { ids: link.ids });
        case 'diff':
          return commands.execute(CommandIDs.diff, {
            a: link.ids[0],
            b: link.ids[1]
          });
      }
    };
    commands.addCommand(CommandIDs.openLink, {
      label: trans.__('Open a kubelab link'),
      describedBy: {
        args: { type: 'object', properties: { search: { type: 'string' } } }
      },
      execute: async args => {
        const search = typeof args.search === 'string' ? args.search : '';
        const link = parseLink(search);
        if (!link) {
          return;
        }
        // Served once: the tab is then the layout's, and a reload restores it.
        const url = new URL(window.location.href);
        url.search = withoutLink(url.search);
        window.history.replaceState(window.history.state, '', url.toString());
        // The router runs as the app starts, while the layout is still being restored:
        // opened after it, the linked view stays in front of the tab the layout brings back.
        await app.restored;
        await openLink(link);
      }
    });
    router?.register({ command: CommandIDs.openLink, pattern: LINK_PATTERN });
    commands.addCommand(CommandIDs.copyLink, {
      label: trans.__('Copy link'),
      caption: trans.__(
        'A URL that opens this view (for you, or anyone allowed to read it)'
      ),
      describedBy: NO_ARGS,
      isEnabled: () => links.has(shell.currentWidget as MainAreaWidget),
      execute: () => {
        const link = links.get(shell.currentWidget as MainAreaWidget);
        if (!link) {
          return;
        }
        const url = new URL(window.location.href);
        url.pathname = URLExt.join(
          PageConfig.getOption('baseUrl') || '/',
          'lab'
        );
        url.search = linkQuery(link);
        url.hash = '';
        Clipboard.copyToSystem(url.toString());
        Notification.success(trans.__('Copied %1', url.toString()), {
          autoClose: 3000
        });
      }
    });
    app.contextMenu.addItem({
      command: CommandIDs.copyLink,
      selector: '.lm-TabBar-tab.jp-kubelab-Tab',
      rank: 50
    });
    commands.addCommand(CommandIDs.refresh, {
      describedBy: NO_ARGS,
      label: trans.__('Refresh experiments'),
      execute: () =>
        store.refresh().catch(fail(trans.__('Cannot refresh the experiments')))
    });
    commands.addCommand(CommandIDs.projectTensorBoard, {
      describedBy: NO_ARGS,
      label: trans.__('Open TensorBoard for all experiments'),
      execute: () =>
        api
          .startTensorBoard({ project: true })
          .then(session =>
            commands.execute(CommandIDs.openTensorBoard, {
              id: session.id,
              url: session.url
            })
          )
          .catch(fail(trans.__('Cannot start TensorBoard')))
    });

    /** A notebook's `parameters` cell as the dialog's starting parameters. */
    const notebookParams = async (path: string): Promise<string> => {
      if (!path.endsWith('.ipynb')) {
        return '';
      }
      try {
        const model = await app.serviceManager.contents.get(path, {
          content: true
        });
        const source = parametersCellSource(model.content);
        return source === null ? '' : paramsFromParametersCell(source);
      } catch (reason) {
        console.warn('kubelab: could not read the parameters cell', reason);
        return '';
      }
    };
    const runFile = async (path: string) => {
      const target = commandFor(path);
      if (!target) {
        await showErrorMessage(
          trans.__('Cannot run %1', path),
          trans.__('Run as experiment takes a .py script or a .ipynb notebook.')
        );
        return;
      }
      const record = await runDialog({
        api,
        trans,
        title: trans.__('Run as experiment'),
        subject: path,
        initial: {
          ...defaultForm(target.name, settings.value.defaults),
          params: await notebookParams(path)
        },
        base: { command: target.command },
        cwd: target.cwd,
        resources: store.resources
      });
      if (record) {
        Notification.success(
          trans.__('Submitted %1 (%2)', record.name, record.id),
          { autoClose: 4000 }
        );
        store.refreshResources();
      }
    };
    const currentPath = (): string | null => {
      const widget = shell.currentWidget as IDocumentWidget | null;
      const path = widget?.context?.path;
      return typeof path === 'string' ? path : null;
    };
    commands.addCommand(CommandIDs.runAsExperiment, {
      describedBy: NO_ARGS,
      label: trans.__('Run as experiment'),
      caption: trans.__('Run this notebook or script as a kubelab experiment'),
      icon: experimentsIcon,
      isEnabled: () => RUNNABLE.test(currentPath() ?? ''),
      execute: async () => {
        const widget = shell.currentWidget as IDocumentWidget | null;
        const path = currentPath();
        if (!widget || !path) {
          return;
        }
        if (widget.context.model.dirty) {
          await widget.context.save(); // the run takes the file as it is on disk
        }
        await runFile(path);
      }
    });
    // The sidebar's Run button asks `isEnabled` only when told the command changed: tell
    // it whenever another tab comes to the front.
    shell.currentChanged.connect(() =>
      commands.notifyCommandChanged(CommandIDs.runAsExperiment)
    );
    const runSweep = async (path: string | null) => {
      const target = path ? commandFor(path) : null;
      const command = target
        ? target.command
            .map(word => (/[\s'"]/.test(word) ? `'${word}'` : word))
            .join(' ')
        : '';
      const record = await sweepDialog({
        api,
        trans,
        subject: path ?? '',
        initial: defaultSweepForm(target?.name ?? 'sweep', command),
        cwd: target?.cwd ?? ''
      });
      if (record) {
        await commands.execute(CommandIDs.openSweep, {
          id: record.id,
          name: record.name
        });
      }
    };
    commands.addCommand(CommandIDs.runAsSweep, {
      describedBy: NO_ARGS,
      label: trans.__('Run as sweep…'),
      icon: experimentsIcon,
      caption: trans.__(
        'Start a hyperparameter sweep of this script or notebook (or of any command)'
      ),
      execute: async () => {
        const widget = shell.currentWidget as IDocumentWidget | null;
        const path = currentPath();
        if (widget && path && RUNNABLE.test(path)) {
          if (widget.context.model.dirty) {
            await widget.context.save();
          }
          return runSweep(path);
        }
        return runSweep(null);
      }
    });
    const selected = (): string | null => {
      const first = browser?.selectedItems().next();
      return first && !first.done ? first.value.path : null;
    };
    commands.addCommand(CommandIDs.runFile, {
      describedBy: NO_ARGS,
      label: trans.__('Run as experiment'),
      icon: experimentsIcon,
      isVisible: () => RUNNABLE.test(selected() ?? ''),
      execute: () => {
        const path = selected();
        return path ? runFile(path) : undefined;
      }
    });
    commands.addCommand(CommandIDs.runFileAsSweep, {
      describedBy: NO_ARGS,
      label: trans.__('Run as sweep…'),
      icon: experimentsIcon,
      isVisible: () => RUNNABLE.test(selected() ?? ''),
      execute: () => runSweep(selected())
    });
    commands.addCommand(CommandIDs.runSpec, {
      describedBy: NO_ARGS,
      label: trans.__('Run spec'),
      icon: experimentsIcon,
      isVisible: () => SPEC_FILE.test(selected() ?? ''),
      execute: async () => {
        const path = selected();
        if (!path) {
          return;
        }
        try {
          const record = await api.submitFile(path);
          Notification.success(
            trans.__('Submitted %1 (%2)', record.name, record.id),
            {
              autoClose: 4000,
              actions: [
                {
                  label: trans.__('Open'),
                  callback: () => void openExperiment(record.id)
                }
              ]
            }
          );
        } catch (reason) {
          await fail(trans.__('Cannot run %1', path))(reason);
        }
      }
    });

    for (const type of ['notebook', 'python']) {
      app.contextMenu.addItem({
        command: CommandIDs.runFile,
        selector: `.jp-DirListing-item[data-file-type="${type}"]`,
        rank: 3
      });
      app.contextMenu.addItem({
        command: CommandIDs.runFileAsSweep,
        selector: `.jp-DirListing-item[data-file-type="${type}"]`,
        rank: 3
      });
    }
    app.contextMenu.addItem({
      command: CommandIDs.runSpec,
      selector: '.jp-DirListing-item[data-file-type="yaml"]',
      rank: 3
    });
    ROW_ACTIONS.forEach((command, rank) =>
      app.contextMenu.addItem({
        command,
        selector: '.jp-kubelab-Row',
        rank
      })
    );

    const category = trans.__('kubelab');
    palette?.addItem({ command: CommandIDs.openSidebar, category });
    palette?.addItem({ command: CommandIDs.runAsExperiment, category });
    palette?.addItem({ command: CommandIDs.runAsSweep, category });
    palette?.addItem({ command: CommandIDs.compare, category });
    palette?.addItem({ command: CommandIDs.refresh, category });
    palette?.addItem({ command: CommandIDs.projectTensorBoard, category });
  }
};

/**
 * Open an output file. Inside the file browser's root it opens in place; otherwise a
 * notebook is copied next to the root's top (`kubelab-outputs/…`) and opened, and
 * other files are downloaded.
 */
async function openOutput(
  app: JupyterFrontEnd,
  api: KubelabApi,
  detail: IExperimentDetail,
  file: IOutputFile
): Promise<void> {
  if (detail.run_dir_relative !== null) {
    await app.commands.execute('docmanager:open', {
      path: `${detail.run_dir_relative}/${RUN_FILES.outputs}/${file.path}`
    });
    return;
  }
  const text = await api.outputText(detail.id, file.path);
  if (file.path.endsWith('.ipynb')) {
    const contents = app.serviceManager.contents;
    const folder = 'kubelab-outputs';
    await contents.get(folder, { content: false }).catch(async () => {
      const made = await contents.newUntitled({ type: 'directory' });
      await contents.rename(made.path, folder);
    });
    const name = file.path.split('/').pop() ?? file.path;
    const path = `${folder}/${detail.id}-${name}`;
    await contents.save(path, {
      type: 'notebook',
      format: 'json',
      content: JSON.parse(text)
    });
    await app.commands.execute('docmanager:open', { path });
    return;
  }
  const link = document.createElement('a');
  link.href = URL.createObjectURL(new Blob([text]));
  link.download = file.path.split('/').pop() ?? 'output';
  link.click();
  URL.revokeObjectURL(link.href);
}

export default [plugin, pipelinesPlugin, idleNoticePlugin];

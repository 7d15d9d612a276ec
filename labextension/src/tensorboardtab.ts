/**
 * A TensorBoard session in a main-area tab, tied to the session's life both ways: closing
 * the tab stops the session (its process would otherwise run until the idle timeout), and
 * a session stopped elsewhere (the sidebar, `%tensorboard --stop`, an idle stop) closes
 * its tab instead of leaving a frame that would start it again on reload.
 */
import { IFrame, MainAreaWidget } from '@jupyterlab/apputils';
import { TranslationBundle } from '@jupyterlab/translation';
import { LabIcon } from '@jupyterlab/ui-components';

import { KubelabApi, sessionEnded } from './api';
import { LiveStore } from './store';

export interface ITensorBoardTabOptions {
  id: string;
  url: string;
  store: LiveStore;
  api: KubelabApi;
  trans: TranslationBundle;
  icon: LabIcon;
  /** Called when stopping the session from a closed tab fails. */
  onStopError(reason: unknown): void;
}

export function tensorBoardTab(
  options: ITensorBoardTabOptions
): MainAreaWidget {
  const { id, url, store, api, trans } = options;
  const frame = new IFrame({
    sandbox: [
      'allow-scripts',
      'allow-same-origin',
      'allow-forms',
      'allow-popups',
      'allow-downloads'
    ]
  });
  frame.url = url;
  frame.addClass('jp-kubelab-TensorBoardFrame');
  const view = new MainAreaWidget({ content: frame });
  view.id = `kubelab-tensorboard-${id}`;
  view.node.dataset.tensorboardId = id;
  // Titled with what it shows, so two TensorBoard tabs can be told apart.
  const retitle = () => {
    const names = Object.keys(
      store.tensorboards.find(s => s.id === id)?.logdirs ?? {}
    );
    view.title.label =
      names.length === 0
        ? trans.__('TensorBoard')
        : names.length === 1
          ? trans.__('TensorBoard · %1', names[0])
          : trans.__('TensorBoard · %1 runs', names.length);
    view.title.caption = names.length ? `${names.join(', ')}\n${url}` : url;
  };
  retitle();
  view.title.icon = options.icon;
  view.title.closable = true;

  let ended = false;
  const follow = () => {
    retitle();
    if (!ended && sessionEnded(store.tensorboards, id)) {
      ended = true;
      view.dispose();
    }
  };
  store.changed.connect(follow);
  view.disposed.connect(() => {
    store.changed.disconnect(follow);
    if (!ended) {
      ended = true;
      api.stopTensorBoard(id).catch(options.onStopError);
    }
  });
  return view;
}

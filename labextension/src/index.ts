/**
 * The kubelab JupyterLab plugin: registers the Experiments sidebar and its command.
 */
import {
  ILabShell,
  ILayoutRestorer,
  JupyterFrontEnd,
  JupyterFrontEndPlugin
} from '@jupyterlab/application';
import { ICommandPalette } from '@jupyterlab/apputils';
import { URLExt } from '@jupyterlab/coreutils';
import { ServerConnection } from '@jupyterlab/services';
import { ITranslator, nullTranslator } from '@jupyterlab/translation';
import { LabIcon } from '@jupyterlab/ui-components';

import experimentsSvg from '../style/icons/experiments.svg';
// eslint-disable-next-line jupyter/prefer-lazy-imports -- the sidebar is shown at startup
import { KubelabApi } from './api';
// eslint-disable-next-line jupyter/prefer-lazy-imports -- the sidebar is shown at startup
import { ExperimentsPanel, SIDEBAR_ID } from './panel';

export const OPEN_SIDEBAR_COMMAND = 'kubelab:open-sidebar';

export const experimentsIcon = new LabIcon({
  name: 'kubelab:experiments',
  svgstr: experimentsSvg
});

/** A `KubelabApi` whose requests carry JupyterLab's token and XSRF headers. */
export function createApi(
  settings = ServerConnection.makeSettings()
): KubelabApi {
  return new KubelabApi(
    URLExt.join(settings.baseUrl, 'kubelab/api/'),
    (url, init) => ServerConnection.makeRequest(url, init, settings)
  );
}

const plugin: JupyterFrontEndPlugin<void> = {
  id: 'kubelab:plugin',
  description: 'The kubelab Experiments sidebar: experiments with live status.',
  autoStart: true,
  requires: [ILabShell],
  optional: [ICommandPalette, ILayoutRestorer, ITranslator],
  activate: (
    app: JupyterFrontEnd,
    shell: ILabShell,
    palette: ICommandPalette | null,
    restorer: ILayoutRestorer | null,
    translator: ITranslator | null
  ) => {
    const trans = (translator ?? nullTranslator).load('kubelab');
    const panel = new ExperimentsPanel(createApi(), experimentsIcon, trans);
    shell.add(panel, 'left', { rank: 600 });
    restorer?.add(panel, SIDEBAR_ID);

    app.commands.addCommand(OPEN_SIDEBAR_COMMAND, {
      label: trans.__('Open the Experiments sidebar'),
      caption: trans.__('Show kubelab experiments with their live status'),
      icon: experimentsIcon,
      describedBy: { args: { type: 'object', properties: {} } },
      execute: () => shell.activateById(panel.id)
    });
    palette?.addItem({
      command: OPEN_SIDEBAR_COMMAND,
      category: trans.__('kubelab')
    });
  }
};

export default plugin;

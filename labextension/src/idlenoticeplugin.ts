/**
 * The plugin that shows the GPU culler's warning (`idlenotice.ts`) with JupyterLab's
 * notifications: a warning that stays until answered, with a "Keep running" button.
 */
import {
  JupyterFrontEnd,
  JupyterFrontEndPlugin
} from '@jupyterlab/application';
import { Notification } from '@jupyterlab/apputils';
import { URLExt } from '@jupyterlab/coreutils';
import { ServerConnection } from '@jupyterlab/services';
import { ITranslator, nullTranslator } from '@jupyterlab/translation';

import type { INoticeDisplay } from './idlenotice';

export const idleNoticePlugin: JupyterFrontEndPlugin<void> = {
  id: 'kubelab:idle-notice',
  description: "Shows the GPU culler's warning with a Keep running button.",
  autoStart: true,
  optional: [ITranslator],
  activate: (app: JupyterFrontEnd, translator: ITranslator | null) => {
    const trans = (translator ?? nullTranslator).load('kubelab');
    const settings = ServerConnection.makeSettings();
    const display: INoticeDisplay = {
      show: (notice, keep) => {
        const id = Notification.warning(notice.message, {
          autoClose: false,
          actions: [
            {
              label: trans.__('Keep running'),
              caption: trans.__('Restart the idle clock of this server'),
              callback: () => {
                keep()
                  .then(() => Notification.dismiss(id))
                  .catch(reason =>
                    Notification.error(String(reason), { autoClose: 5000 })
                  );
              }
            }
          ]
        });
      }
    };
    // the watcher loads after the application has started: the first warning is minutes away
    void import('./idlenotice').then(({ IdleNoticeWatcher, POLL_MS }) => {
      const watcher = new IdleNoticeWatcher(
        URLExt.join(settings.baseUrl, 'kubelab/api/'),
        (url, init) => ServerConnection.makeRequest(url, init, settings),
        display
      );
      void watcher.check();
      window.setInterval(() => void watcher.check(), POLL_MS);
    });
  }
};

/**
 * The app's `KubelabApi`: requests that carry JupyterLab's token and XSRF headers. Kept
 * apart from `api.ts` so that the client itself runs under plain `fetch` in tests.
 */
import { URLExt } from '@jupyterlab/coreutils';
import { ServerConnection } from '@jupyterlab/services';

import { KubelabApi } from './api';

/** A `KubelabApi` whose requests carry JupyterLab's token and XSRF headers. */
export function createApi(
  settings = ServerConnection.makeSettings()
): KubelabApi {
  return new KubelabApi(
    URLExt.join(settings.baseUrl, 'kubelab/api/'),
    (url, init) => ServerConnection.makeRequest(url, init, settings)
  );
}

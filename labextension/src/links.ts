/**
 * Links to kubelab's views: `/lab?kubelab=run/ID` (also `sweep/ID`, `pipeline/ID`,
 * `compare/ID,ID`, `diff/A,B`) opens the view in JupyterLab, on the same server or on a hub for a user
 * allowed to read it (the view's requests are the reader's own). Pure, so jest runs it.
 */

export type LinkKind = 'run' | 'sweep' | 'pipeline' | 'compare' | 'diff';

export interface ILink {
  kind: LinkKind;
  /** One id, or the compared runs. */
  ids: string[];
}

/** The query parameter a link sets. */
export const LINK_PARAM = 'kubelab';

/** The router pattern: a page URL whose query names a kubelab view. */
export const LINK_PATTERN = /[?&]kubelab=/;

const KINDS: readonly LinkKind[] = [
  'run',
  'sweep',
  'pipeline',
  'compare',
  'diff'
];
/** How many ids each kind names: one, two (a diff's sides) or any (compared runs). */
const COUNTS: Record<LinkKind, number | null> = {
  run: 1,
  sweep: 1,
  pipeline: 1,
  compare: null,
  diff: 2
};
const ID = /^[A-Za-z0-9][A-Za-z0-9._-]{0,127}$/;

/** The view a URL's query names, or null when it names none (or something malformed). */
export function parseLink(search: string): ILink | null {
  const value = new URLSearchParams(search).get(LINK_PARAM);
  if (!value) {
    return null;
  }
  const slash = value.indexOf('/');
  const kind = value.slice(0, slash) as LinkKind;
  if (slash < 0 || !KINDS.includes(kind)) {
    return null;
  }
  const ids = value
    .slice(slash + 1)
    .split(',')
    .filter(id => id !== '');
  if (ids.length === 0 || !ids.every(id => ID.test(id))) {
    return null;
  }
  const count = COUNTS[kind];
  if (count !== null && ids.length !== count) {
    return null;
  }
  return { kind, ids };
}

/** The query a link to `link` carries: `?kubelab=run/ID`. */
export function linkQuery(link: ILink): string {
  return `?${LINK_PARAM}=${link.kind}/${link.ids.join(',')}`;
}

/** `search` without the kubelab parameter (so a reload does not open the view again). */
export function withoutLink(search: string): string {
  const params = new URLSearchParams(search);
  params.delete(LINK_PARAM);
  const rest = params.toString();
  return rest ? `?${rest}` : '';
}

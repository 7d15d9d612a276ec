/**
 * The sidebar's "My usage" line, under Resources: what this user's own runs used this week
 * (`GET usage?since=7d`, summed by the server from the run records).
 */
import { TranslationBundle } from '@jupyterlab/translation';
import React, { useEffect, useState } from 'react';

import { TERMINAL_STATES } from './model';
import { LiveStore } from './store';
import { IUsage, usageLine } from './system';

const USAGE_EVERY_MS = 60_000;

/**
 * "My usage": GPU-hours, energy and mean GPU utilisation of this week's runs (the server sums
 * the user's own records); re-read each minute and whenever a run ends.
 */
export function MyUsage(props: {
  store: LiveStore;
  trans: TranslationBundle;
}): JSX.Element {
  const { store, trans } = props;
  const [usage, setUsage] = useState<IUsage | null>(null);
  const [error, setError] = useState('');
  const ended = store.table.rows.filter(row =>
    TERMINAL_STATES.has(row.status)
  ).length;
  useEffect(() => {
    let disposed = false;
    const load = () =>
      store.api.usage('7d').then(
        value => !disposed && (setUsage(value), setError('')),
        reason => !disposed && setError(String(reason?.message ?? reason))
      );
    void load();
    const timer = window.setInterval(load, USAGE_EVERY_MS);
    return () => {
      disposed = true;
      window.clearInterval(timer);
    };
  }, [store, ended]);
  return (
    <div className="jp-kubelab-MyUsage" data-loaded={usage !== null}>
      <h3 className="jp-kubelab-Resources-heading">
        {trans.__('My usage (7 days)')}
      </h3>
      {usage ? (
        <p className="jp-kubelab-MyUsage-line jp-kubelab-Number">
          {usageLine(usage, trans)}
        </p>
      ) : null}
      {error ? <p className="jp-kubelab-Error">{error}</p> : null}
    </div>
  );
}

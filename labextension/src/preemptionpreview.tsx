/**
 * "What a new run would preempt", under the sidebar's Resources: a GPU count and a priority,
 * and the server's answer (`GET resources/preview`, preview.ts), asked again as they change
 * and as GPUs change hands.
 */
import { TranslationBundle } from '@jupyterlab/translation';
import React, { useEffect, useState } from 'react';

import { describeError } from './api';
import { describePreview } from './preview';
import { LiveStore } from './store';

const PRIORITIES = ['low', 'normal', 'high'] as const;

/** The GPUs and priority boxes, and the server's answer for them (asked again as they change). */
export function PreemptionPreview(props: {
  store: LiveStore;
  trans: TranslationBundle;
}): JSX.Element {
  const { store, trans } = props;
  const [gpus, setGpus] = useState('1');
  const [priority, setPriority] = useState<string>('high');
  const [answer, setAnswer] = useState('');
  const [error, setError] = useState('');
  // The answer changes as runs start and end: ask again when the resources do.
  const resources = store.resources;
  useEffect(() => {
    let disposed = false;
    store.api.preview(gpus, priority).then(
      preview => {
        if (!disposed) {
          setAnswer(describePreview(preview, trans));
          setError('');
        }
      },
      reason => {
        if (!disposed) {
          setAnswer('');
          setError(describeError(reason));
        }
      }
    );
    return () => {
      disposed = true;
    };
  }, [store, gpus, priority, resources]);
  return (
    <div className="jp-kubelab-PreemptionPreview">
      <h3 className="jp-kubelab-Resources-heading">
        {trans.__('A new run would…')}
      </h3>
      <label>
        {trans.__('GPUs')}{' '}
        <input
          className="jp-kubelab-PreemptionPreview-gpus"
          type="number"
          min="0"
          step="1"
          value={gpus}
          onChange={event => setGpus(event.target.value)}
        />
      </label>{' '}
      <label>
        {trans.__('priority')}{' '}
        <select
          className="jp-kubelab-PreemptionPreview-priority"
          value={priority}
          onChange={event => setPriority(event.target.value)}
        >
          {PRIORITIES.map(name => (
            <option key={name} value={name}>
              {name}
            </option>
          ))}
        </select>
      </label>
      {answer ? (
        <p className="jp-kubelab-PreemptionPreview-answer">{answer}</p>
      ) : null}
      {error ? <p className="jp-kubelab-Error">{error}</p> : null}
    </div>
  );
}

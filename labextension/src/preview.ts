/**
 * What a new run would preempt: the server's answer (`GET resources/preview?gpus=2&priority=high`),
 * which is the GPU ledger's own placement asked without marking anyone
 * (kubelab/backends/local/placement.py), and its one line for the sidebar's Resources
 * (preemptionpreview.tsx): "would preempt exp-12 (low), shrink exp-9 from 4 to 2".
 */
import { TranslationBundle } from '@jupyterlab/translation';

import { RecordFormatError } from './model';

/** One running run the new run would take GPUs from. */
export interface IPreemptionChange {
  id: string;
  name: string | null;
  priority: string;
  /** `preempt`: the whole run stops and waits; `shrink`: an elastic run gives up replicas. */
  action: 'preempt' | 'shrink';
  /** A shrink's size before and after, in replicas. */
  replicas: number | null;
  to: number | null;
}

/** The server's answer for a run of a given size and priority. */
export interface IPreemptionPreview {
  backend: string;
  /** The GPUs free for it now; empty when it would have to take or wait. */
  gpus: number[];
  changes: IPreemptionChange[];
  /** Runs queued before it (at its priority or above). */
  ahead: number;
}

/** Check the server's answer. */
export function parsePreview(value: unknown): IPreemptionPreview {
  const body = (value ?? {}) as Record<string, unknown>;
  if (typeof body.backend !== 'string' || !Array.isArray(body.changes)) {
    throw new RecordFormatError(
      'preview',
      'expected {backend, gpus, changes, ahead}'
    );
  }
  const changes = body.changes.map((raw, index) => {
    const change = (raw ?? {}) as Record<string, unknown>;
    const action = change.action;
    if (
      typeof change.id !== 'string' ||
      (action !== 'preempt' && action !== 'shrink')
    ) {
      throw new RecordFormatError(
        `preview.changes[${index}]`,
        'expected an id and an action (preempt or shrink)'
      );
    }
    return {
      id: change.id,
      name: typeof change.name === 'string' ? change.name : null,
      priority: String(change.priority ?? ''),
      action,
      replicas: typeof change.replicas === 'number' ? change.replicas : null,
      to: typeof change.to === 'number' ? change.to : null
    } as IPreemptionChange;
  });
  const gpus = Array.isArray(body.gpus)
    ? body.gpus.filter((g): g is number => typeof g === 'number')
    : [];
  const ahead = typeof body.ahead === 'number' ? body.ahead : 0;
  return { backend: body.backend, gpus, changes, ahead };
}

/**
 * The answer in one line: "starts now on GPU 0,1", "would preempt exp-12 (low), shrink exp-9
 * from 4 to 2", or "would wait: …"; with the runs queued before it.
 */
export function describePreview(
  preview: IPreemptionPreview,
  trans: TranslationBundle
): string {
  const label = (change: IPreemptionChange) => change.name ?? change.id;
  let text: string;
  if (preview.gpus.length > 0) {
    text = trans.__('would start now on GPU %1', preview.gpus.join(','));
  } else if (preview.changes.length > 0) {
    const parts = preview.changes.map(change =>
      change.action === 'shrink'
        ? trans.__(
            'shrink %1 from %2 to %3',
            label(change),
            change.replicas ?? '?',
            change.to ?? '?'
          )
        : trans.__('preempt %1 (%2)', label(change), change.priority)
    );
    text = trans.__('would %1', parts.join(', '));
  } else {
    text = trans.__(
      'would wait: no GPUs are free and no run it may preempt holds them'
    );
  }
  if (preview.ahead > 0) {
    text += trans._n(
      ' (once the %1 run queued before it has started)',
      ' (once the %1 runs queued before it have started)',
      preview.ahead
    );
  }
  return text;
}

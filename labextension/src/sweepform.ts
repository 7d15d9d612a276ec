/**
 * The "Run as sweep" dialog's form as data: its fields, the sweep spec they make (the
 * search space goes to the server as typed, JSON or YAML, and the server validates it
 * all), and the server's `field.path: reason` errors put next to the form's fields.
 */
import type { Refusal } from './submitform';

export { EARLY_STOPPING, TUNERS } from './vocabulary';

export interface ISweepForm {
  name: string;
  command: string;
  /** The search space as typed: NNI's format in JSON or YAML. */
  space: string;
  tuner: string;
  metric: string;
  direction: string;
  maxTrials: string;
  concurrency: string;
  earlyStopping: string;
  gpus: string;
}

export type SweepField = keyof ISweepForm;

export type SweepErrors = Refusal<SweepField>;

export const SPACE_EXAMPLE = `lr:
  _type: loguniform
  _value: [0.0001, 0.1]
batch_size:
  _type: choice
  _value: [32, 64, 128]
`;

export function defaultSweepForm(name: string, command: string): ISweepForm {
  return {
    name,
    command,
    space: SPACE_EXAMPLE,
    tuner: 'tpe',
    metric: 'loss',
    direction: 'minimize',
    maxTrials: '10',
    concurrency: '2',
    earlyStopping: 'none',
    gpus: '0'
  };
}

/** A whole number as a number; anything else as typed, for the server to name. */
function count(text: string): number | string | undefined {
  const trimmed = text.trim();
  if (!trimmed) {
    return undefined;
  }
  return /^-?\d+$/.test(trimmed) ? Number(trimmed) : trimmed;
}

/** The sweep spec for `POST sweeps` (the server checks every field). */
export function buildSweepSpec(form: ISweepForm): Record<string, unknown> {
  const spec: Record<string, unknown> = {
    space: form.space,
    tuner: form.tuner,
    objective: { metric: form.metric.trim(), direction: form.direction },
    trial: {
      command: form.command.trim(),
      resources: { gpus: count(form.gpus) ?? 0 }
    }
  };
  if (form.name.trim()) {
    spec.name = form.name.trim();
  }
  const maxTrials = count(form.maxTrials);
  if (maxTrials !== undefined) {
    spec.max_trials = maxTrials;
  }
  const concurrency = count(form.concurrency);
  if (concurrency !== undefined) {
    spec.concurrency = concurrency;
  }
  if (form.earlyStopping !== 'none') {
    spec.early_stopping = form.earlyStopping;
  }
  return spec;
}

/** The form field a server error path belongs to (`general` when none does). */
export function sweepFieldForPath(path: string): SweepField | 'general' {
  const head = path.split(/[.[ ]/)[0];
  if (path.startsWith('trial.resources.gpus')) {
    return 'gpus';
  }
  if (path === 'objective.direction') {
    return 'direction';
  }
  const fields: Record<string, SweepField> = {
    name: 'name',
    space: 'space',
    space_file: 'space',
    tuner: 'tuner',
    objective: 'metric',
    max_trials: 'maxTrials',
    max_duration: 'maxTrials',
    concurrency: 'concurrency',
    early_stopping: 'earlyStopping',
    trial: 'command'
  };
  return fields[head] ?? 'general';
}

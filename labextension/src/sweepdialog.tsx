/**
 * The "Run as sweep" dialog: name, command, the search space (JSON or YAML, NNI's
 * format), tuner, objective, budget, concurrency, early stopping and GPUs per trial. The
 * server validates; when it refuses, the dialog comes back with the values kept and each
 * reason next to its field (`space.lr._value: …`), and editing the field clears it.
 */
import { Dialog, showDialog } from '@jupyterlab/apputils';
import { TranslationBundle } from '@jupyterlab/translation';
import React, { useState } from 'react';

import { KubelabApi, KubelabApiError } from './api';
import { pendingErrors } from './form';
import { FormBody, useErrorsSignal } from './formbody';
import { ISweepRecord } from './sweeps';
import {
  buildSweepSpec,
  EARLY_STOPPING,
  ISweepForm,
  SweepErrors,
  sweepErrorsByField,
  SweepField,
  TUNERS
} from './sweepform';

function SweepFormView(props: {
  initial: ISweepForm;
  errors: SweepErrors;
  subject: string;
  trans: TranslationBundle;
  onChange(value: ISweepForm): void;
}): JSX.Element {
  const { trans } = props;
  const [form, setForm] = useState(props.initial);
  const errors = pendingErrors(props.errors, props.initial, form);
  const body = useErrorsSignal(Object.keys(errors).join(','));
  const update =
    (key: SweepField) =>
    (
      event: React.ChangeEvent<
        HTMLInputElement | HTMLSelectElement | HTMLTextAreaElement
      >
    ) => {
      const next = { ...form, [key]: event.target.value };
      setForm(next);
      props.onChange(next);
    };
  const field = (
    key: SweepField,
    label: string,
    input: JSX.Element,
    hint?: string
  ) => (
    <div
      className={`jp-kubelab-Field${errors[key] ? ' jp-mod-error' : ''}`}
      data-field={key}
    >
      <label htmlFor={`kubelab-sweep-${key}`}>{label}</label>
      {input}
      {hint ? <div className="jp-kubelab-Field-hint">{hint}</div> : null}
      {(errors[key] ?? []).map(message => (
        <div key={message} className="jp-kubelab-Field-error" role="alert">
          {message}
        </div>
      ))}
    </div>
  );
  const text = (key: SweepField, placeholder = '') => (
    <input
      id={`kubelab-sweep-${key}`}
      name={key}
      className="jp-mod-styled"
      value={form[key]}
      placeholder={placeholder}
      aria-invalid={errors[key] ? true : undefined}
      onChange={update(key)}
    />
  );
  const select = (key: SweepField, options: readonly string[]) => (
    <select
      id={`kubelab-sweep-${key}`}
      name={key}
      className="jp-mod-styled"
      value={form[key]}
      onChange={update(key)}
    >
      {options.map(option => (
        <option key={option} value={option}>
          {option}
        </option>
      ))}
    </select>
  );
  return (
    <div className="jp-kubelab-RunForm-body" ref={body}>
      {props.subject ? (
        <p className="jp-kubelab-RunForm-subject">
          <code>{props.subject}</code>
        </p>
      ) : null}
      {(errors.general ?? []).map(message => (
        <div
          key={message}
          className="jp-kubelab-Field-error jp-kubelab-RunForm-general"
          role="alert"
        >
          {message}
        </div>
      ))}
      {field('name', trans.__('Name'), text('name'))}
      {field(
        'command',
        trans.__('Trial command'),
        text('command', 'python train.py'),
        trans.__(
          'each trial gets its parameters from kubelab.params() (and as --name=value)'
        )
      )}
      {field(
        'space',
        trans.__('Search space'),
        <textarea
          id="kubelab-sweep-space"
          name="space"
          className="jp-mod-styled jp-kubelab-SweepForm-space"
          rows={8}
          value={form.space}
          spellCheck={false}
          aria-invalid={errors.space ? true : undefined}
          onChange={update('space')}
        />,
        trans.__(
          "NNI's format, as JSON or YAML: name: {_type: choice | uniform | loguniform | randint | …, _value: […]}"
        )
      )}
      <div className="jp-kubelab-RunForm-row">
        {field('tuner', trans.__('Tuner'), select('tuner', TUNERS))}
        {field(
          'earlyStopping',
          trans.__('Early stopping'),
          select('earlyStopping', EARLY_STOPPING)
        )}
      </div>
      <div className="jp-kubelab-RunForm-row">
        {field('metric', trans.__('Objective metric'), text('metric'))}
        {field(
          'direction',
          trans.__('Direction'),
          select('direction', ['minimize', 'maximize'])
        )}
      </div>
      <div className="jp-kubelab-RunForm-row">
        {field('maxTrials', trans.__('Max trials'), text('maxTrials'))}
        {field('concurrency', trans.__('Concurrency'), text('concurrency'))}
        {field('gpus', trans.__('GPUs per trial'), text('gpus'))}
      </div>
    </div>
  );
}

/** What was typed into a cancelled sweep dialog, per subject, for this page's life. */
const drafts = new Map<string, ISweepForm>();

/**
 * Show the dialog until the server accepts the sweep or the user cancels; resolves to
 * the new sweep's record, or null.
 */
export async function sweepDialog(options: {
  api: KubelabApi;
  trans: TranslationBundle;
  subject: string;
  initial: ISweepForm;
  cwd: string;
}): Promise<ISweepRecord | null> {
  const { api, trans } = options;
  let form = drafts.get(options.subject) ?? options.initial;
  let errors: SweepErrors = {};
  for (;;) {
    const refused = errors;
    const body = new FormBody<ISweepForm>(
      form,
      props => (
        <SweepFormView
          {...props}
          errors={refused}
          subject={options.subject}
          trans={trans}
        />
      ),
      'jp-kubelab-SweepForm'
    );
    const result = await showDialog({
      title: trans.__('Run as sweep'),
      body,
      buttons: [
        Dialog.cancelButton({ label: trans.__('Cancel') }),
        Dialog.okButton({ label: trans.__('Start sweep') })
      ],
      focusNodeSelector: 'input[name="name"]'
    });
    form = body.getValue();
    if (!result.button.accept) {
      drafts.set(options.subject, form);
      return null;
    }
    try {
      const record = await api.createSweep(buildSweepSpec(form), options.cwd);
      drafts.delete(options.subject);
      return record;
    } catch (error) {
      errors =
        error instanceof KubelabApiError && error.fields.length
          ? sweepErrorsByField(error.fields)
          : {
              general: [error instanceof Error ? error.message : String(error)]
            };
    }
  }
}

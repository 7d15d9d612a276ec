/**
 * The "Run as sweep" dialog: name, command, the search space (JSON or YAML, NNI's
 * format), tuner, objective, budget, concurrency, early stopping and GPUs per trial. The
 * server validates; when it refuses, the dialog comes back with the values kept and each
 * reason next to its field (`space.lr._value: …`), and editing the field clears it.
 */
import { TranslationBundle } from '@jupyterlab/translation';
import React from 'react';

import { KubelabApi } from './api';
import { showForm } from './formbody';
import { IFormFieldsProps, useFormFields } from './formfields';
import { submitForm } from './submitform';
import { ISweepRecord } from './sweeps';
import {
  buildSweepSpec,
  EARLY_STOPPING,
  ISweepForm,
  SweepField,
  sweepFieldForPath,
  TUNERS
} from './sweepform';

function SweepFormView(
  props: IFormFieldsProps<ISweepForm> & {
    subject: string;
    trans: TranslationBundle;
  }
): JSX.Element {
  const { trans } = props;
  const { form, errors, body, id, update, field, text, general } =
    useFormFields(props, 'kubelab-sweep');
  const select = (key: SweepField, options: readonly string[]) => (
    <select
      id={id(key)}
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
      {general}
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
          rows={Math.min(30, Math.max(6, form.space.split('\n').length + 1))}
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
  return submitForm({
    subject: options.subject,
    initial: options.initial,
    drafts,
    fieldFor: sweepFieldForPath,
    ask: (value, refusal) =>
      showForm({
        title: trans.__('Run as sweep'),
        value,
        view: props => (
          <SweepFormView
            {...props}
            errors={refusal}
            subject={options.subject}
            trans={trans}
          />
        ),
        className: 'jp-kubelab-SweepForm',
        cancel: trans.__('Cancel'),
        accept: trans.__('Start sweep')
      }),
    send: form => api.createSweep(buildSweepSpec(form), options.cwd)
  });
}

/**
 * The "Run as experiment" dialog: name, GPUs and type (with what is free now), CPU,
 * memory, image, replicas, framework and parameters. The server validates; when it
 * refuses, the dialog comes back with the values kept and each reason next to its
 * field (`resources.memory: 'lots' is not a Kubernetes quantity …`).
 */
import { Dialog, showDialog } from '@jupyterlab/apputils';
import { TranslationBundle } from '@jupyterlab/translation';
import React, { useState } from 'react';

import { IResources, KubelabApi, KubelabApiError } from './api';
import {
  buildSpec,
  errorsByField,
  FieldErrors,
  FormField,
  FRAMEWORKS,
  IRunForm,
  pendingErrors
} from './form';
import { FormBody, useErrorsSignal } from './formbody';
import { IExperimentRecord } from './model';

const PARAMS_EXAMPLE = 'lr=0.01\nbatch_size=64';

type Errors = FieldErrors;

function RunFormView(props: {
  initial: IRunForm;
  errors: Errors;
  resources: IResources | null;
  subject: string;
  trans: TranslationBundle;
  onChange(value: IRunForm): void;
}): JSX.Element {
  const { resources, trans } = props;
  const [form, setForm] = useState(props.initial);
  // A reason stays next to its field only while the field holds the refused value: once
  // the user edits it, the reason (and JupyterLab's `.jp-mod-error`, which keeps the
  // dialog's accept button disabled) goes, so the corrected form can be sent again.
  const errors = pendingErrors(props.errors, props.initial, form);
  const body = useErrorsSignal(Object.keys(errors).join(','));
  const update =
    (key: FormField) =>
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
    key: FormField,
    label: string,
    input: JSX.Element,
    hint?: string
  ) => (
    <div
      className={`jp-kubelab-Field${errors[key] ? ' jp-mod-error' : ''}`}
      data-field={key}
    >
      <label htmlFor={`kubelab-run-${key}`}>{label}</label>
      {input}
      {hint ? <div className="jp-kubelab-Field-hint">{hint}</div> : null}
      {(errors[key] ?? []).map(message => (
        <div key={message} className="jp-kubelab-Field-error" role="alert">
          {message}
        </div>
      ))}
    </div>
  );
  const text = (key: FormField, placeholder = '') => (
    <input
      id={`kubelab-run-${key}`}
      name={key}
      className="jp-mod-styled"
      value={form[key]}
      placeholder={placeholder}
      aria-invalid={errors[key] ? true : undefined}
      onChange={update(key)}
    />
  );
  const types = resources?.gpus.types ?? [];
  const availability = resources
    ? types.length
      ? types
          .map(t =>
            t.total === null
              ? t.name
              : trans.__('%1: %2 of %3 free', t.name, t.free, t.total)
          )
          .join(' · ')
      : resources.gpus.total
        ? trans.__(
            '%1 of %2 GPUs free',
            resources.gpus.free,
            resources.gpus.total
          )
        : trans.__('no GPUs on this backend')
    : trans.__('GPU availability unknown');
  return (
    <div className="jp-kubelab-RunForm-body" ref={body}>
      <p className="jp-kubelab-RunForm-subject">
        <code>{props.subject}</code>
      </p>
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
      <div className="jp-kubelab-RunForm-row">
        {field(
          'gpus',
          trans.__('GPUs'),
          <input
            id="kubelab-run-gpus"
            name="gpus"
            className="jp-mod-styled"
            type="text"
            inputMode="numeric"
            value={form.gpus}
            onChange={update('gpus')}
          />
        )}
        {field(
          'gpuType',
          trans.__('GPU type'),
          <select
            id="kubelab-run-gpuType"
            name="gpuType"
            className="jp-mod-styled"
            value={form.gpuType}
            onChange={update('gpuType')}
          >
            <option value="">{trans.__('any')}</option>
            {types.map(t => (
              <option key={t.name} value={t.name}>
                {t.total === null
                  ? t.name
                  : trans.__('%1 (%2/%3 free)', t.name, t.free, t.total)}
              </option>
            ))}
            {form.gpuType && !types.some(t => t.name === form.gpuType) ? (
              <option value={form.gpuType}>{form.gpuType}</option>
            ) : null}
          </select>
        )}
      </div>
      <div className="jp-kubelab-RunForm-availability" data-availability="">
        {availability}
      </div>
      <div className="jp-kubelab-RunForm-row">
        {field('cpu', trans.__('CPU'), text('cpu', '4 or 500m'))}
        {field('memory', trans.__('Memory'), text('memory', '16Gi'))}
      </div>
      {field(
        'image',
        trans.__('Image'),
        text('image', trans.__('the notebook image'))
      )}
      <div className="jp-kubelab-RunForm-row">
        {field('replicas', trans.__('Replicas'), text('replicas'))}
        {field(
          'framework',
          trans.__('Framework'),
          <select
            id="kubelab-run-framework"
            name="framework"
            className="jp-mod-styled"
            value={form.framework}
            onChange={update('framework')}
          >
            {FRAMEWORKS.map(name => (
              <option key={name} value={name}>
                {name}
              </option>
            ))}
          </select>
        )}
      </div>
      {field(
        'params',
        trans.__('Parameters'),
        <textarea
          id="kubelab-run-params"
          name="params"
          className="jp-mod-styled"
          rows={4}
          value={form.params}
          placeholder={PARAMS_EXAMPLE}
          spellCheck={false}
          onChange={update('params')}
        />,
        trans.__(
          'name=value per line, or a JSON object; notebooks get them in their parameters cell'
        )
      )}
    </div>
  );
}

/**
 * What the user typed into a dialog they cancelled, per subject (a file, or the run being
 * re-run), so opening it again for the same subject does not start from scratch. Kept for
 * this page's life only.
 */
const drafts = new Map<string, IRunForm>();

export interface IRunDialogOptions {
  api: KubelabApi;
  trans: TranslationBundle;
  title: string;
  /** Shown at the top: the file or the experiment being re-run. */
  subject: string;
  initial: IRunForm;
  /** The spec the form's fields are laid over (command, code, env, …). */
  base: Record<string, unknown>;
  /** Where the spec's relative paths start, relative to the server's root. */
  cwd: string;
  resources: IResources | null;
}

/**
 * Show the dialog until the server accepts the spec or the user cancels; resolves to
 * the new experiment's record, or null.
 */
export async function runDialog(
  options: IRunDialogOptions
): Promise<IExperimentRecord | null> {
  const { api, trans } = options;
  let form = drafts.get(options.subject) ?? options.initial;
  let errors: Errors = {};
  let resources = options.resources;
  for (;;) {
    const refused = errors;
    const shownResources = resources;
    const body = new FormBody<IRunForm>(
      form,
      props => (
        <RunFormView
          {...props}
          errors={refused}
          resources={shownResources}
          subject={options.subject}
          trans={trans}
        />
      ),
      'jp-kubelab-RunForm'
    );
    const result = await showDialog({
      title: options.title,
      body,
      buttons: [
        Dialog.cancelButton({ label: trans.__('Cancel') }),
        Dialog.okButton({ label: trans.__('Run') })
      ],
      focusNodeSelector: 'input[name="name"]'
    });
    form = body.getValue();
    if (!result.button.accept) {
      drafts.set(options.subject, form);
      return null;
    }
    const built = buildSpec(form, options.base);
    if ('errors' in built) {
      errors = errorsByField(built.errors);
      continue;
    }
    try {
      const record = await api.submit(built.spec, options.cwd);
      drafts.delete(options.subject);
      return record;
    } catch (error) {
      if (error instanceof KubelabApiError && error.fields.length) {
        errors = errorsByField(error.fields);
      } else {
        errors = {
          general: [error instanceof Error ? error.message : String(error)]
        };
      }
      resources = await api.resources().catch(() => resources);
    }
  }
}

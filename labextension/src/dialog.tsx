/**
 * The "Run as experiment" dialog: name, GPUs and type (with what is free now), CPU,
 * memory, image, replicas, framework and parameters. The server validates; when it
 * refuses, the dialog comes back with the values kept and each reason next to its
 * field (`resources.memory: 'lots' is not a Kubernetes quantity …`).
 */
import { TranslationBundle } from '@jupyterlab/translation';
import React from 'react';

import { IResources, KubelabApi } from './api';
import {
  buildSpec,
  fieldForPath,
  FormField,
  FRAMEWORKS,
  IRunForm,
  RUN_FORM_FIELDS
} from './form';
import { showForm } from './formbody';
import { IFormFieldsProps, useFormFields } from './formfields';
import { IExperimentRecord } from './model';
import { FormRefused, submitForm } from './submitform';

const PARAMS_EXAMPLE = 'lr=0.01\nbatch_size=64';

/** The fields this dialog lays out itself; any other declared field follows them. */
const LAID_OUT: ReadonlySet<FormField> = new Set([
  'name',
  'gpus',
  'gpuType',
  'cpu',
  'memory',
  'image',
  'replicas',
  'framework',
  'params'
]);

function RunFormView(
  props: IFormFieldsProps<IRunForm> & {
    resources: IResources | null;
    subject: string;
    trans: TranslationBundle;
  }
): JSX.Element {
  const { resources, trans } = props;
  const { form, body, update, field, text, general } = useFormFields(
    props,
    'kubelab-run'
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
      {general}
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
      {RUN_FORM_FIELDS.filter(declared => !LAID_OUT.has(declared.key)).map(
        declared => (
          <React.Fragment key={declared.key}>
            {field(
              declared.key,
              declared.label, // declared in Python (kubelab/options.py), untranslated
              declared.kind === 'choice' ? (
                <select
                  id={`kubelab-run-${declared.key}`}
                  name={declared.key}
                  className="jp-mod-styled"
                  value={form[declared.key]}
                  onChange={update(declared.key)}
                >
                  {declared.choices.map(name => (
                    <option key={name} value={name}>
                      {name}
                    </option>
                  ))}
                </select>
              ) : (
                text(declared.key, declared.placeholder)
              ),
              declared.help
            )}
          </React.Fragment>
        )
      )}
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
  let resources = options.resources;
  return submitForm({
    subject: options.subject,
    initial: options.initial,
    drafts,
    fieldFor: fieldForPath,
    ask: (value, refusal) => {
      const shownResources = resources;
      return showForm({
        title: options.title,
        value,
        view: props => (
          <RunFormView
            {...props}
            errors={refusal}
            resources={shownResources}
            subject={options.subject}
            trans={trans}
          />
        ),
        className: 'jp-kubelab-RunForm',
        cancel: trans.__('Cancel'),
        accept: trans.__('Run')
      });
    },
    send: async form => {
      const built = buildSpec(form, options.base);
      if ('errors' in built) {
        throw new FormRefused(built.errors);
      }
      try {
        return await api.submit(built.spec, options.cwd);
      } catch (error) {
        // The dialog comes back showing what is free now.
        resources = await api.resources().catch(() => resources);
        throw error;
      }
    }
  });
}

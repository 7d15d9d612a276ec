/**
 * The fields of a dialog form (the run and sweep dialogs): what the user types is kept as
 * they type it, and a refused field shows its reasons beside it, marked with JupyterLab's
 * `.jp-mod-error`, only while it still holds the refused value. Once the user edits it the
 * reasons go, and with them the mark that keeps the dialog's accept button disabled, so
 * the corrected form can be sent again.
 */
import React, { useState } from 'react';

import { useErrorsSignal } from './formbody';
import { pendingErrors, Refusal } from './submitform';

type Input = HTMLInputElement | HTMLSelectElement | HTMLTextAreaElement;

/** What a form view gets: the value it starts from, the reasons it was refused for, and where to report changes. */
export interface IFormFieldsProps<F> {
  initial: F;
  errors: Refusal<keyof F & string>;
  onChange(value: F): void;
}

/**
 * A form's value and its field builders. `prefix` makes the inputs' ids
 * (`kubelab-run-name`), which the labels point at.
 */
export function useFormFields<F extends Record<keyof F, string>>(
  props: IFormFieldsProps<F>,
  prefix: string
) {
  type Key = keyof F & string;
  const [form, setForm] = useState(props.initial);
  const errors = pendingErrors(props.errors, props.initial, form);
  const body = useErrorsSignal(Object.keys(errors).join(','));
  const id = (key: Key) => `${prefix}-${key}`;
  const update = (key: Key) => (event: React.ChangeEvent<Input>) => {
    const next = { ...form, [key]: event.target.value };
    setForm(next);
    props.onChange(next);
  };
  const field = (
    key: Key,
    label: string,
    input: JSX.Element,
    hint?: string
  ) => (
    <div
      className={`jp-kubelab-Field${errors[key] ? ' jp-mod-error' : ''}`}
      data-field={key}
    >
      <label htmlFor={id(key)}>{label}</label>
      {input}
      {hint ? <div className="jp-kubelab-Field-hint">{hint}</div> : null}
      {(errors[key] ?? []).map(message => (
        <div key={message} className="jp-kubelab-Field-error" role="alert">
          {message}
        </div>
      ))}
    </div>
  );
  const text = (key: Key, placeholder = '') => (
    <input
      id={id(key)}
      name={key}
      className="jp-mod-styled"
      value={form[key]}
      placeholder={placeholder}
      aria-invalid={errors[key] ? true : undefined}
      onChange={update(key)}
    />
  );
  /** The reasons that belong to no field, above the fields. */
  const general = (errors.general ?? []).map(message => (
    <div
      key={message}
      className="jp-kubelab-Field-error jp-kubelab-RunForm-general"
      role="alert"
    >
      {message}
    </div>
  ));
  return { form, errors, body, id, update, field, text, general };
}

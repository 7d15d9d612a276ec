/**
 * What the run and sweep dialogs do once the user presses their button: send the form,
 * and when it is refused (by the server, or by the dialog's own check) show it again
 * with what the user typed and each reason beside its field, until it is accepted or
 * cancelled. A cancelled dialog's values are kept per subject for the page's life.
 */
import { IFieldError, KubelabApiError } from './api';

/** Reasons per form field, and under `general` those that belong to no field. */
export type Refusal<K extends string> = Partial<
  Record<K | 'general', string[]>
>;

/** Field errors grouped by the input they belong beside, each shown as `path: reason`. */
export function groupByField<K extends string>(
  fields: readonly IFieldError[],
  fieldFor: (path: string) => K | 'general'
): Refusal<K> {
  const grouped: Refusal<K> = {};
  for (const field of fields) {
    (grouped[fieldFor(field.path)] ??= []).push(
      `${field.path}: ${field.reason}`
    );
  }
  return grouped;
}

/** The reasons that still apply: those of fields whose value is still the one refused. */
export function pendingErrors<K extends string>(
  errors: Refusal<NoInfer<K>>,
  refused: Record<K, unknown>,
  now: Record<K, unknown>
): Refusal<K> {
  const pending: Refusal<K> = {};
  for (const [key, messages] of Object.entries(errors) as [
    K | 'general',
    string[]
  ][]) {
    if (key === 'general' || refused[key as K] === now[key as K]) {
      pending[key] = messages;
    }
  }
  return pending;
}

/** A form refused before it was sent: the browser's own check found these fields wrong. */
export class FormRefused extends Error {
  constructor(readonly fields: IFieldError[]) {
    super(fields.map(field => `${field.path}: ${field.reason}`).join('; '));
    this.name = 'FormRefused';
  }
}

/** What a failed send shows: its field errors by input, else its message as `general`. */
export function refusalOf<K extends string>(
  error: unknown,
  fieldFor: (path: string) => K | 'general'
): Refusal<K> {
  if (
    (error instanceof KubelabApiError || error instanceof FormRefused) &&
    error.fields.length
  ) {
    return groupByField(error.fields, fieldFor);
  }
  const message = error instanceof Error ? error.message : String(error);
  return { general: [message] } as Refusal<K>;
}

/** The user's answer to a form dialog: whether they pressed its button, and what they typed. */
export interface IFormAnswer<F> {
  accept: boolean;
  value: F;
}

export interface ISubmitForm<F, K extends string, R> {
  /** What the dialog is for (a file, the run being re-run): drafts are kept per subject. */
  subject: string;
  initial: F;
  /** Cancelled dialogs' values, per subject. */
  drafts: Map<string, F>;
  /** Show the form holding `value`, with `refusal`'s reasons beside their fields. */
  ask(value: F, refusal: Refusal<K>): Promise<IFormAnswer<F>>;
  /** Send the form; a throw refuses it (`KubelabApiError`, `FormRefused` or any error). */
  send(value: F): Promise<R>;
  /** The field a refused path belongs beside (`general` when none does). */
  fieldFor(path: string): K | 'general';
}

/**
 * Ask until the form is accepted (resolves to what `send` gave) or cancelled (null, and
 * the values are kept as the subject's draft).
 */
export async function submitForm<F, K extends string, R>(
  options: ISubmitForm<F, K, R>
): Promise<R | null> {
  const { subject, drafts } = options;
  let value = drafts.get(subject) ?? options.initial;
  let refusal: Refusal<K> = {};
  for (;;) {
    const answer = await options.ask(value, refusal);
    value = answer.value;
    if (!answer.accept) {
      drafts.set(subject, value);
      return null;
    }
    try {
      const result = await options.send(value);
      drafts.delete(subject);
      return result;
    } catch (error) {
      refusal = refusalOf(error, options.fieldFor);
    }
  }
}

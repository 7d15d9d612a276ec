/**
 * The "Run as experiment" dialog as plain data: the form's fields, turning them into a
 * spec, prefilling them from a spec (re-run with changes), and placing the server's
 * field errors next to the right input. The server stays the judge of what is valid:
 * values go through as typed, so its messages (`resources.memory: 'lots' is not a
 * Kubernetes quantity …`) are the ones users see.
 */
import type { IFieldError } from './api';
import { RUN_FORM_FIELDS } from './vocabulary';
import { formatNumber } from './model';
import type { Refusal } from './submitform';

export { FRAMEWORKS, RUN_FORM_FIELDS } from './vocabulary';

/** A form field's key (`gpuType`); the fields are declared in kubelab/options.py. */
export type FormField = (typeof RUN_FORM_FIELDS)[number]['key'];

/** The dialog's values as typed, one string per declared field. */
export type IRunForm = Record<FormField, string>;

/** Defaults from the settings (`defaultResources`, `defaultImage`). */
export interface IRunDefaults {
  gpus: number;
  gpuType: string;
  cpu: string;
  memory: string;
  image: string;
}

export const NO_DEFAULTS: IRunDefaults = {
  gpus: 0,
  gpuType: '',
  cpu: '',
  memory: '',
  image: ''
};

/** What is being run: a file in the workspace, or an earlier experiment's spec. */
export type RunTarget =
  | { kind: 'file'; path: string }
  | { kind: 'rerun'; spec: Record<string, unknown>; name: string };

/**
 * The command and working folder for a file: a script runs with Python, a notebook
 * headless through papermill (`kubelab.papermill_run`). Null for other files.
 */
export function commandFor(
  path: string
): { cwd: string; command: string[]; name: string } | null {
  const clean = path.replace(/^\/+/, '');
  const slash = clean.lastIndexOf('/');
  const cwd = slash < 0 ? '' : clean.slice(0, slash);
  const file = clean.slice(slash + 1);
  const stem = file.replace(/\.[^.]+$/, '');
  if (file.endsWith('.py')) {
    return { cwd, command: ['python', file], name: stem };
  }
  if (file.endsWith('.ipynb')) {
    return {
      cwd,
      command: ['python', '-m', 'kubelab.papermill_run', file],
      name: stem
    };
  }
  return null;
}

/** A fresh form for a file, with the user's defaults. */
export function defaultForm(name: string, defaults: IRunDefaults): IRunForm {
  const form = emptyForm(field => field.default);
  form.name = toDnsName(name);
  for (const [key, value] of Object.entries(defaults)) {
    if (key in form && value !== null && value !== undefined) {
      form[key as FormField] = String(value);
    }
  }
  return form;
}

type RunFormField = (typeof RUN_FORM_FIELDS)[number];

function emptyForm(value: (field: RunFormField) => string): IRunForm {
  return Object.fromEntries(
    RUN_FORM_FIELDS.map(field => [field.key, value(field)])
  ) as IRunForm;
}

/** The value at a dotted spec path (`resources.gpus`), or undefined. */
function atPath(spec: Record<string, unknown>, path: string): unknown {
  let value: unknown = spec;
  for (const name of path.split('.')) {
    value = (value as Record<string, unknown> | null | undefined)?.[name];
  }
  return value;
}

/** Experiment names become Kubernetes labels: lower case, digits and dashes. */
export function toDnsName(text: string): string {
  return text
    .toLowerCase()
    .replace(/[^a-z0-9-]+/g, '-')
    .replace(/^-+|-+$/g, '')
    .slice(0, 63);
}

/** The form for re-running `spec` with changes. */
export function formFromSpec(spec: Record<string, unknown>): IRunForm {
  return emptyForm(field => {
    const value = atPath(spec, field.path);
    if (field.kind === 'params') {
      return formatParamsText((value ?? {}) as Record<string, unknown>);
    }
    return value === null || value === undefined
      ? field.default
      : String(value);
  });
}

/** `name=value` lines: the way parameters are shown and typed in the dialog. */
export function formatParamsText(params: Record<string, unknown>): string {
  return Object.entries(params)
    .map(([key, value]) => {
      const shown =
        typeof value === 'number'
          ? formatNumber(value)
          : typeof value === 'string' && !looksTyped(value)
            ? value
            : JSON.stringify(value);
      return `${key}=${shown}`;
    })
    .join('\n');
}

/** Strings that would read back as another type must stay quoted. */
function looksTyped(value: string): boolean {
  return parseValue(value) !== value || value.trim() !== value;
}

/**
 * Parameters from the dialog: a JSON object, or `name=value` lines (`#` comments and
 * blank lines ignored). Values read as JSON when they can (`0.01`, `true`, `[1, 2]`,
 * `"quoted"`), otherwise as text (`relu`).
 */
export function parseParams(
  text: string
): { params: Record<string, unknown> } | { error: string } {
  const trimmed = text.trim();
  if (!trimmed) {
    return { params: {} };
  }
  if (trimmed.startsWith('{')) {
    try {
      const value = JSON.parse(trimmed);
      if (
        typeof value === 'object' &&
        value !== null &&
        !Array.isArray(value)
      ) {
        return { params: value };
      }
    } catch (error) {
      return { error: `not a valid JSON object (${(error as Error).message})` };
    }
    return { error: 'not a valid JSON object' };
  }
  const params: Record<string, unknown> = {};
  const lines = text.split(/\r?\n/);
  for (let i = 0; i < lines.length; i++) {
    const line = lines[i].trim();
    if (!line || line.startsWith('#')) {
      continue;
    }
    const match = /^([A-Za-z_][\w.-]*)\s*[=:]\s*(.*)$/.exec(line);
    if (!match) {
      return { error: `line ${i + 1}: expected name=value, got "${line}"` };
    }
    if (match[1] in params) {
      return { error: `line ${i + 1}: "${match[1]}" is given twice` };
    }
    params[match[1]] = parseValue(match[2]);
  }
  return { params };
}

function parseValue(raw: string): unknown {
  const text = raw.trim();
  if (text === '') {
    return '';
  }
  try {
    return JSON.parse(text);
  } catch {
    return text;
  }
}

/** A whole number typed as text goes to the server as a number; anything else as typed. */
function numberOrText(text: string): number | string {
  const trimmed = text.trim();
  return /^-?\d+$/.test(trimmed) ? Number(trimmed) : trimmed;
}

/** A quantity: `4` and `0.5` as numbers, `500m`/`16Gi` as text. */
function quantity(text: string): number | string {
  const trimmed = text.trim();
  return /^-?\d+(\.\d+)?$/.test(trimmed) ? Number(trimmed) : trimmed;
}

/**
 * The spec to submit: the form's fields over `base` (the command for a file, or the
 * earlier spec for a re-run). Empty optional fields are left out so the server's
 * defaults apply. Only the parameters are checked here, since only the browser knows
 * how they were typed.
 */
export function buildSpec(
  form: IRunForm,
  base: Record<string, unknown>
): { spec: Record<string, unknown> } | { errors: IFieldError[] } {
  const parsed = parseParams(form.params);
  if ('error' in parsed) {
    return { errors: [{ path: 'params', reason: parsed.error }] };
  }
  const spec: Record<string, unknown> = { ...base };
  const resources: Record<string, unknown> = {
    ...((base.resources as Record<string, unknown>) ?? {})
  };
  const set = (
    target: Record<string, unknown>,
    key: string,
    value: unknown
  ) => {
    if (value === '' || value === null || value === undefined) {
      delete target[key];
    } else {
      target[key] = value;
    }
  };
  for (const field of RUN_FORM_FIELDS) {
    const typed = form[field.key].trim() || field.default;
    const [outer, inner] = field.path.split('.');
    const target = inner === undefined ? spec : resources;
    if (inner !== undefined && outer !== 'resources') {
      throw new Error(`the form cannot set ${field.path}`);
    }
    const key = inner ?? outer;
    if (field.kind === 'params') {
      target[key] = parsed.params;
    } else if (field.kind === 'integer') {
      set(target, key, numberOrText(typed));
    } else if (field.kind === 'quantity') {
      set(target, key, quantity(typed));
    } else {
      set(target, key, typed);
    }
  }
  spec.resources = resources;
  if (spec.code) {
    delete spec.workdir; // derived from the code snapshot; a new run takes its own
  }
  return { spec };
}

/** Which input a server error belongs next to (`general` when none fits). */
export function fieldForPath(path: string): FormField | 'general' {
  for (const field of RUN_FORM_FIELDS) {
    if (path === field.path || path.startsWith(`${field.path}.`)) {
      return field.key;
    }
  }
  return 'general';
}

/** Reasons per form field (and `general` for the rest), as the dialog shows them. */
export type FieldErrors = Refusal<FormField>;

const PYTHON_ASSIGNMENT =
  /^([A-Za-z_]\w*)\s*=\s*("(?:[^"\\]|\\.)*"|'(?:[^'\\]|\\.)*'|[^#]+?)\s*(?:#.*)?$/;

/**
 * The dialog's parameters text (`name=value` lines) from a notebook's papermill
 * `parameters` cell: top-level `name = literal` lines, with Python's `True`, `False`,
 * `None` and single-quoted strings spelled as JSON. Lines that are not such a simple
 * assignment (imports, calls, indented code) are left out: the notebook keeps them.
 */
export function paramsFromParametersCell(source: string): string {
  const lines: string[] = [];
  for (const line of source.split(/\r?\n/)) {
    const match = PYTHON_ASSIGNMENT.exec(line);
    if (!match) {
      continue;
    }
    let value = match[2].trim();
    if (value === 'True' || value === 'False') {
      value = value.toLowerCase();
    } else if (value === 'None') {
      value = 'null';
    } else if (value.startsWith("'")) {
      value = JSON.stringify(
        value.slice(1, -1).replace(/\\'/g, "'").replace(/\\\\/g, '\\')
      );
    } else if (!value.startsWith('"') && !/^[-+]?[\d.eE+-]+$/.test(value)) {
      continue; // an expression (a call, a name): not a literal the dialog can pass
    }
    lines.push(`${match[1]}=${value}`);
  }
  return lines.join('\n');
}

/** The source of a notebook's cell tagged `parameters` (papermill's convention), or null. */
export function parametersCellSource(notebook: unknown): string | null {
  const cells = (notebook as { cells?: unknown })?.cells;
  if (!Array.isArray(cells)) {
    return null;
  }
  for (const cell of cells) {
    const tags = cell?.metadata?.tags;
    if (Array.isArray(tags) && tags.includes('parameters')) {
      const source = cell.source;
      return Array.isArray(source) ? source.join('') : String(source ?? '');
    }
  }
  return null;
}

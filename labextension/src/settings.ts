/** The user's settings (`schema/plugin.json`), read defensively with the schema's defaults. */
import { COLUMNS, Column } from './model';
import { IRunDefaults, NO_DEFAULTS } from './form';

export interface IKubelabSettings {
  defaults: IRunDefaults;
  columns: Column[];
}

export const DEFAULT_SETTINGS: IKubelabSettings = {
  defaults: NO_DEFAULTS,
  columns: [...COLUMNS]
};

/** Settings from the registry's composite value; unknown columns are dropped, name is kept. */
export function readSettings(
  composite: Record<string, unknown> | null
): IKubelabSettings {
  const resources = (composite?.defaultResources ?? {}) as Record<
    string,
    unknown
  >;
  const text = (value: unknown) => (typeof value === 'string' ? value : '');
  const requested = Array.isArray(composite?.columns)
    ? (composite.columns as unknown[])
    : COLUMNS;
  const columns = requested.filter((c): c is Column =>
    (COLUMNS as readonly unknown[]).includes(c)
  );
  return {
    defaults: {
      gpus:
        typeof resources.gpus === 'number' && resources.gpus >= 0
          ? resources.gpus
          : 0,
      gpuType: text(resources.gpuType),
      cpu: text(resources.cpu),
      memory: text(resources.memory),
      image: text(composite?.defaultImage)
    },
    columns: columns.includes('name') ? columns : ['name', ...columns]
  };
}

/**
 * A sweep's trials table: a grid (arrow keys between cells, Enter opens the trial,
 * Enter or Space on a header sorts by it), sortable by number, status, the objective or
 * any parameter. The best trial is marked, and pruned trials say so.
 */
import { TranslationBundle } from '@jupyterlab/translation';
import React, { useRef } from 'react';

import { formatValue } from './model';
import { SortHeader } from './sortheader';
import {
  ITrialRow,
  ITrialSort,
  lineageText,
  shownObjective,
  sortTrials,
  toggleTrialSort,
  trialStatusText,
  TrialSortKey
} from './sweeps';
import {
  formatSystem,
  measuredColumns,
  systemLabel,
  systemValue
} from './system';
import { useGrid } from './usegrid';

export function TrialTable(props: {
  trials: readonly ITrialRow[];
  params: readonly string[];
  metric: string;
  best: number | null;
  sort: ITrialSort;
  trans: TranslationBundle;
  onSort(sort: ITrialSort): void;
  onOpen(trial: ITrialRow): void;
}): JSX.Element {
  const { params, metric, sort, trans } = props;
  const rows = sortTrials(props.trials, sort);
  const system = measuredColumns(props.trials);
  const pbt = props.trials.some(trial => trial.lineage);
  const table = useRef<HTMLTableElement>(null);
  const columns: { key: TrialSortKey; label: string }[] = [
    { key: 'trial', label: '#' },
    { key: 'status', label: trans.__('Status') },
    { key: 'objective', label: metric },
    ...(pbt
      ? [{ key: 'lineage' as TrialSortKey, label: trans.__('Lineage') }]
      : []),
    ...system.map(key => ({
      key: `system:${key}` as TrialSortKey,
      label: systemLabel(key, trans)
    })),
    ...params.map(name => ({
      key: `param:${name}` as TrialSortKey,
      label: name
    }))
  ];
  const keys = useGrid(table, { rows: rows.length + 1, cols: columns.length });
  return (
    <table
      className="jp-kubelab-Trials"
      role="grid"
      ref={table}
      aria-label={trans.__('Trials')}
      aria-rowcount={rows.length + 1}
      onKeyDown={keys.onKeyDown}
      onFocus={keys.onFocus}
    >
      <thead>
        <tr role="row" aria-rowindex={1}>
          {columns.map(column => (
            <SortHeader
              key={column.key}
              column={column.key}
              label={column.label}
              active={sort.key === column.key}
              descending={sort.descending}
              trans={trans}
              onSort={() => props.onSort(toggleTrialSort(sort, column.key))}
            />
          ))}
        </tr>
      </thead>
      <tbody>
        {rows.map((trial, index) => {
          const pruned = trial.result === 'pruned';
          return (
            <tr
              key={trial.trial}
              role="row"
              aria-rowindex={index + 2}
              data-trial={trial.trial}
              className={[
                props.best === trial.trial ? 'jp-kubelab-Trials-best' : '',
                pruned ? 'jp-kubelab-Trials-pruned' : ''
              ]
                .join(' ')
                .trim()}
              onClick={() => props.onOpen(trial)}
              title={trial.result_reason ?? undefined}
            >
              <td role="gridcell" tabIndex={-1}>
                {trial.trial}
              </td>
              <td role="gridcell" tabIndex={-1}>
                <span
                  className={`jp-kubelab-StatusDot jp-kubelab-StatusDot-${String(trial.status).toLowerCase()}`}
                />
                {trialStatusText(trial)}
              </td>
              <ObjectiveCell trial={trial} metric={metric} trans={trans} />
              {pbt ? (
                <td
                  role="gridcell"
                  tabIndex={-1}
                  data-lineage
                  title={
                    trial.lineage?.parent === null || !trial.lineage
                      ? undefined
                      : trans.__(
                          'from trial %1 at step %2',
                          trial.lineage.parent,
                          trial.lineage.start_step
                        )
                  }
                >
                  {lineageText(trial.lineage)}
                </td>
              ) : null}
              {system.map(key => (
                <td
                  role="gridcell"
                  tabIndex={-1}
                  key={`system:${key}`}
                  className="jp-kubelab-Number"
                  data-system={key}
                >
                  {formatSystem(key, systemValue(trial, key))}
                </td>
              ))}
              {params.map(name => (
                <td role="gridcell" tabIndex={-1} key={name}>
                  {formatValue(trial.params?.[name], '—')}
                </td>
              ))}
            </tr>
          );
        })}
      </tbody>
    </table>
  );
}

function ObjectiveCell(props: {
  trial: ITrialRow;
  metric: string;
  trans: TranslationBundle;
}): JSX.Element {
  const shown = shownObjective(props.trial, props.metric);
  return (
    <td
      role="gridcell"
      tabIndex={-1}
      className="jp-kubelab-Number"
      data-last={shown.last || undefined}
      title={
        shown.last
          ? props.trans.__('the last %1 it reported', props.metric)
          : undefined
      }
    >
      {formatValue(shown.value, '—')}
      {shown.last ? (
        <span className="jp-kubelab-Trials-last" aria-hidden="true">
          †
        </span>
      ) : null}
    </td>
  );
}

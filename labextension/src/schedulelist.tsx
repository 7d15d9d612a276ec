/**
 * The Schedules list of the Pipelines sidebar: each schedule with what it starts, its
 * cron and zone, the last fire (its outcome) and the next, both as wall-clock times in
 * the schedule's own zone, and Pause/Resume/Delete. The list itself is kept live by the
 * sidebar's event stream (`schedule`, `schedule_deleted`).
 */
import { Dialog, showDialog } from '@jupyterlab/apputils';
import { TranslationBundle } from '@jupyterlab/translation';
import React from 'react';

import { createApi } from './connection';
import { formatInZone, IScheduleRecord, lastFire } from './schedules';
import { ItemList, reportFailure, RowAction } from './sidebarlist';

export function ScheduleList(props: {
  schedules: readonly IScheduleRecord[];
  trans: TranslationBundle;
  /** Called with the server's answer, so the row changes before the event arrives. */
  onChanged(record: IScheduleRecord): void;
  onRemoved(id: string): void;
}): JSX.Element {
  const { schedules, trans } = props;
  const api = createApi();
  const act = (record: IScheduleRecord, action: 'pause' | 'resume') =>
    api
      .scheduleAction(record.id, action)
      .then(
        props.onChanged,
        reportFailure(trans.__('Cannot %1 %2', action, record.name))
      );
  const remove = async (record: IScheduleRecord) => {
    const answer = await showDialog({
      title: trans.__('Delete schedule %1?', record.name),
      body: trans.__('It stops firing; what it already started keeps running.'),
      buttons: [
        Dialog.cancelButton(),
        Dialog.warnButton({ label: trans.__('Delete') })
      ]
    });
    if (answer.button.accept) {
      await api
        .deleteSchedule(record.id)
        .then(
          () => props.onRemoved(record.id),
          reportFailure(trans.__('Cannot delete %1', record.name))
        );
    }
  };
  return (
    <ItemList
      items={schedules}
      className="jp-kubelab-ScheduleList"
      emptyClassName="jp-kubelab-Pipelines-empty"
      empty={trans.__(
        'No schedules. Add one with kubelab schedule add -f FILE (a spec with a schedule: section).'
      )}
    >
      {s => {
        const last = lastFire(s);
        return (
          <li
            key={s.id}
            className="jp-kubelab-Schedule"
            data-schedule-id={s.id}
            data-paused={s.paused}
          >
            <div className="jp-kubelab-Schedule-line">
              <span className="jp-kubelab-Schedule-name">{s.name}</span>
              <span className="jp-kubelab-Schedule-kind">{s.kind}</span>
              <RowAction
                className="jp-kubelab-Schedule-toggle"
                label={s.paused ? trans.__('Resume') : trans.__('Pause')}
                onClick={() => act(s, s.paused ? 'resume' : 'pause')}
              />
              <RowAction
                className="jp-kubelab-Schedule-delete"
                label={trans.__('Delete')}
                onClick={() => remove(s)}
              />
            </div>
            <div className="jp-kubelab-Schedule-when">
              <code>{s.cron}</code> {s.timezone}
            </div>
            <div className="jp-kubelab-Schedule-next">
              {s.paused
                ? trans.__('paused')
                : s.next_at
                  ? trans.__('next %1', formatInZone(s.next_at, s.timezone))
                  : trans.__('no further fire')}
            </div>
            <div
              className="jp-kubelab-Schedule-last"
              title={last?.reason ?? ''}
            >
              {last
                ? trans.__(
                    'last %1: %2%3',
                    formatInZone(last.at, s.timezone),
                    last.state,
                    last.id ? ` (${last.id})` : ''
                  )
                : trans.__('not fired yet')}
            </div>
          </li>
        );
      }}
    </ItemList>
  );
}

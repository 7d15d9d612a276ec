/**
 * The schedules list's model, free of JupyterLab so jest runs it: the record the REST API
 * and the event stream send, merging `schedule`/`schedule_deleted` events into a list,
 * and times shown in the schedule's own time zone (a Europe/Berlin schedule's next fire
 * reads 09:00 GMT+1, not 08:00 UTC).
 */

export interface IScheduleFire {
  at: string;
  state: string;
  id?: string | null;
  reason?: string;
}

export interface IScheduleRecord {
  id: string;
  name: string;
  kind: string;
  cron: string;
  timezone: string;
  paused: boolean;
  next_at: string | null;
  fires: IScheduleFire[];
}

/** Insert or replace a schedule; the list stays in id order (the order of creation). */
export function applySchedule(
  list: readonly IScheduleRecord[],
  record: IScheduleRecord
): IScheduleRecord[] {
  const rest = list.filter(s => s.id !== record.id);
  return [...rest, record].sort((a, b) => (a.id < b.id ? -1 : 1));
}

export function removeSchedule(
  list: readonly IScheduleRecord[],
  id: string
): IScheduleRecord[] {
  return list.filter(s => s.id !== id);
}

/** The last fire that happened (a fire still starting counts), or null. */
export function lastFire(record: IScheduleRecord): IScheduleFire | null {
  const fires = record.fires ?? [];
  return fires.length ? fires[fires.length - 1] : null;
}

/** `2026-11-27 09:00 GMT+1`: an instant as a wall clock in `timeZone`, zone named. */
export function formatInZone(iso: string, timeZone: string): string {
  const date = new Date(iso);
  if (Number.isNaN(date.getTime())) {
    return iso;
  }
  let parts: Intl.DateTimeFormatPart[];
  try {
    parts = new Intl.DateTimeFormat('en-US', {
      timeZone,
      year: 'numeric',
      month: '2-digit',
      day: '2-digit',
      hour: '2-digit',
      minute: '2-digit',
      hourCycle: 'h23',
      timeZoneName: 'short'
    }).formatToParts(date);
  } catch {
    return `${date.toISOString().slice(0, 16).replace('T', ' ')} UTC`; // unknown zone
  }
  const part = (type: Intl.DateTimeFormatPartTypes) =>
    parts.find(p => p.type === type)?.value ?? '';
  return `${part('year')}-${part('month')}-${part('day')} ${part('hour')}:${part('minute')} ${part('timeZoneName')}`;
}

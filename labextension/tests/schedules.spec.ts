import {
  applySchedule,
  formatInZone,
  IScheduleRecord,
  lastFire,
  removeSchedule
} from '../src/schedules';

function schedule(id: string, overrides: Partial<IScheduleRecord> = {}) {
  return {
    id,
    name: id,
    kind: 'pipeline',
    cron: '0 9 * * *',
    timezone: 'Europe/Berlin',
    paused: false,
    next_at: '2026-11-27T08:00:00Z',
    fires: [],
    ...overrides
  };
}

describe('schedules', () => {
  it('shows a fire in the schedule time zone, not in UTC', () => {
    expect(formatInZone('2026-11-27T08:00:00Z', 'Europe/Berlin')).toBe(
      '2026-11-27 09:00 GMT+1'
    );
    expect(formatInZone('2026-07-01T08:00:00Z', 'Europe/Berlin')).toBe(
      '2026-07-01 10:00 GMT+2'
    );
    expect(formatInZone('2026-11-27T08:00:00Z', 'UTC')).toBe(
      '2026-11-27 08:00 UTC'
    );
  });

  it('falls back to UTC for a zone the browser does not know', () => {
    expect(formatInZone('2026-11-27T08:00:00Z', 'Mars/Olympus')).toBe(
      '2026-11-27 08:00 UTC'
    );
  });

  it('merges events into the list: added, changed in place, removed', () => {
    let list = applySchedule([], schedule('b'));
    list = applySchedule(list, schedule('a'));
    list = applySchedule(list, schedule('b', { paused: true }));
    expect(list.map(s => [s.id, s.paused])).toEqual([
      ['a', false],
      ['b', true]
    ]);
    expect(removeSchedule(list, 'a').map(s => s.id)).toEqual(['b']);
  });

  it('names the last fire', () => {
    expect(lastFire(schedule('a'))).toBeNull();
    const fires = [
      { at: '2026-11-26T08:00:00Z', state: 'started', id: 'p1' },
      { at: '2026-11-27T08:00:00Z', state: 'skipped' }
    ];
    expect(lastFire(schedule('a', { fires }))?.state).toBe('skipped');
  });
});

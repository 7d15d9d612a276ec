import {
  applyEvent,
  comparator,
  IExperimentRecord,
  ISortOrder,
  loadTable,
  needsRefetch,
  parseRecord,
  sortTable,
  sortValue,
  toggleSort
} from '../src/model';
import { visibleWindow } from '../src/virtual';
import { record } from './server';

const STATUSES = ['Pending', 'Queued', 'Running', 'Succeeded', 'Failed'];

/** A deterministic pseudo-random sequence, so failures reproduce. */
function random(seed: number): () => number {
  let state = seed;
  return () => {
    state = (state * 1103515245 + 12345) % 2147483648;
    return state / 2147483648;
  };
}

function experiments(count: number, seed = 1): IExperimentRecord[] {
  const next = random(seed);
  const start = Date.parse('2026-11-01T00:00:00Z');
  return Array.from({ length: count }, (_, i) => {
    const finished = next() < 0.7;
    return parseRecord(
      record({
        id: `r${String(i).padStart(11, '0')}`,
        name: `run-${Math.floor(next() * 500)}`,
        status: STATUSES[Math.floor(next() * STATUSES.length)],
        created_at: new Date(start + i * 60_000).toISOString(),
        started_at: new Date(start + i * 60_000 + 1000).toISOString(),
        duration: finished ? Math.round(next() * 5000) : null,
        metrics: next() < 0.8 ? { loss: Math.round(next() * 1e4) / 1e4 } : {},
        params: { lr: Math.round(next() * 100) / 1000 },
        resources: { gpus: Math.floor(next() * 3), gpu_type: 'T4' }
      })
    );
  });
}

const ids = (rows: readonly IExperimentRecord[]) => rows.map(r => r.id);
const SORTS: ISortOrder[] = [
  { column: 'created', descending: true },
  { column: 'name', descending: false },
  { column: 'status', descending: true },
  { column: 'duration', descending: true },
  { column: 'gpus', descending: false },
  { column: 'metric', descending: false },
  { column: 'metric', descending: true },
  { column: 'started', descending: false }
];

function isSorted(
  rows: readonly IExperimentRecord[],
  sort: ISortOrder
): boolean {
  const compare = comparator(sort);
  return rows.every((row, i) => i === 0 || compare(rows[i - 1], row) <= 0);
}

describe('the table model on 10,000 experiments', () => {
  const records = experiments(10_000);

  it.each(SORTS)('loads and sorts by %o', sort => {
    const table = loadTable(records, sort);
    expect(table.rows).toHaveLength(10_000);
    expect(isSorted(table.rows, sort)).toBe(true);
  });

  it('keeps every order exact through 2,000 live events', () => {
    const next = random(7);
    for (const sort of [SORTS[0], SORTS[3], SORTS[5]]) {
      let table = loadTable(records, sort);
      const truth = new Map(records.map(r => [r.id, r]));
      for (let i = 0; i < 2000; i++) {
        const roll = next();
        if (roll < 0.1) {
          const victim = table.rows[Math.floor(next() * table.rows.length)];
          table = applyEvent(table, { kind: 'deleted', id: victim.id });
          truth.delete(victim.id);
        } else if (roll < 0.3) {
          const fresh = experiments(1, i + 100)[0];
          const added = {
            ...fresh,
            id: `n${String(i).padStart(11, '0')}`,
            created_at: new Date(
              Date.parse('2026-12-01T00:00:00Z') + i
            ).toISOString()
          };
          table = applyEvent(table, { kind: 'experiment', record: added });
          truth.set(added.id, added);
        } else {
          const target = table.rows[Math.floor(next() * table.rows.length)];
          const changed = {
            ...target,
            status: 'Succeeded' as const,
            metrics: { loss: Math.round(next() * 1e4) / 1e4 },
            duration: Math.round(next() * 9000)
          };
          table = applyEvent(table, { kind: 'experiment', record: changed });
          truth.set(changed.id, changed);
        }
      }
      expect(table.rows).toHaveLength(truth.size);
      expect(isSorted(table.rows, sort)).toBe(true);
      expect(ids(table.rows)).toEqual(
        ids(loadTable([...truth.values()], sort).rows)
      );
      expect(table.rows.every(row => truth.get(row.id) === row)).toBe(true);
    }
  });

  it('renders only a screenful of rows wherever the list is scrolled', () => {
    const rowHeight = 28;
    for (const scrollTop of [0, 5000, 140_000, 279_972, 10_000_000]) {
      const window = visibleWindow(10_000, rowHeight, scrollTop, 600, 8);
      expect(window.end - window.start).toBeLessThanOrEqual(
        Math.ceil(600 / rowHeight) + 1 + 16
      );
      expect(window.totalHeight).toBe(280_000);
      expect(window.offsetTop).toBe(window.start * rowHeight);
      // The rows under the viewport are always among those rendered.
      const firstShown = Math.floor(
        Math.min(scrollTop, 280_000 - 600) / rowHeight
      );
      expect(window.start).toBeLessThanOrEqual(firstShown);
      expect(window.end).toBeGreaterThanOrEqual(
        Math.min(
          10_000,
          Math.ceil((Math.min(scrollTop, 280_000 - 600) + 600) / rowHeight)
        )
      );
    }
  });
});

describe('visibleWindow', () => {
  it('handles an empty list and a viewport taller than the list', () => {
    expect(visibleWindow(0, 28, 0, 500)).toEqual({
      start: 0,
      end: 0,
      offsetTop: 0,
      totalHeight: 0
    });
    expect(visibleWindow(5, 28, 0, 500)).toEqual({
      start: 0,
      end: 5,
      offsetTop: 0,
      totalHeight: 140
    });
  });

  it('clamps a negative scroll position', () => {
    expect(visibleWindow(100, 10, -50, 100, 0)).toMatchObject({
      start: 0,
      end: 11
    });
  });
});

describe('sorting', () => {
  const [a, b, c] = experiments(3, 3);
  const withMetric = (r: IExperimentRecord, loss: number | null) => ({
    ...r,
    metrics: (loss === null ? {} : { loss }) as Record<string, number>
  });

  it('puts rows without a value last in both directions', () => {
    const rows = [withMetric(a, null), withMetric(b, 0.5), withMetric(c, 0.1)];
    const up = loadTable(rows, { column: 'metric', descending: false });
    const down = loadTable(rows, { column: 'metric', descending: true });
    expect(ids(up.rows)).toEqual([c.id, b.id, a.id]);
    expect(ids(down.rows)).toEqual([b.id, c.id, a.id]);
  });

  it('prefers the final objective over other metrics', () => {
    const r = { ...a, metrics: { loss: 0.9, default: 0.2 } };
    expect(sortValue(r, 'metric')).toBe(0.2);
  });

  it('ranks running runs as the longest, earliest start first', () => {
    const running = { ...a, duration: null, status: 'Running' as const };
    const older = {
      ...b,
      duration: null,
      status: 'Running' as const,
      started_at: '2026-01-01T00:00:00Z'
    };
    const done = { ...c, duration: 99999 };
    const table = loadTable([running, done, older], {
      column: 'duration',
      descending: true
    });
    expect(ids(table.rows)).toEqual([older.id, running.id, done.id]);
  });

  it('sortTable returns the same table for the same order', () => {
    const table = loadTable([a, b]);
    expect(sortTable(table, { ...table.sort })).toBe(table);
    expect(sortTable(table, { column: 'name', descending: false })).not.toBe(
      table
    );
  });

  it('toggleSort flips the current column and starts new ones sensibly', () => {
    expect(
      toggleSort({ column: 'created', descending: true }, 'metric')
    ).toEqual({ column: 'metric', descending: true });
    expect(
      toggleSort({ column: 'metric', descending: true }, 'metric')
    ).toEqual({ column: 'metric', descending: false });
    expect(toggleSort({ column: 'metric', descending: true }, 'name')).toEqual({
      column: 'name',
      descending: false
    });
  });
});

describe('needsRefetch', () => {
  const [a, b] = experiments(2, 5);
  const table = loadTable([a]);

  it('never refetches without a filter', () => {
    expect(needsRefetch(table, { kind: 'experiment', record: b }, false)).toBe(
      false
    );
  });

  it('refetches a filtered list for a new run or a status change, not a metric', () => {
    expect(needsRefetch(table, { kind: 'experiment', record: b }, true)).toBe(
      true
    );
    const moved = {
      ...a,
      status:
        a.status === 'Failed' ? ('Succeeded' as const) : ('Failed' as const)
    };
    expect(
      needsRefetch(table, { kind: 'experiment', record: moved }, true)
    ).toBe(true);
    const metric = { ...a, metrics: { loss: 0.001 } };
    expect(
      needsRefetch(table, { kind: 'experiment', record: metric }, true)
    ).toBe(false);
    expect(needsRefetch(table, { kind: 'deleted', id: a.id }, true)).toBe(
      false
    );
  });
});

import {
  applyEvent,
  applyEvents,
  elapsedSeconds,
  EMPTY_TABLE,
  formatDuration,
  formatLatestMetric,
  IExperimentRecord,
  loadTable,
  parseEvent,
  parseList,
  parseRecord,
  RecordFormatError
} from '../src/model';
import { record } from './server';

const make = (overrides: Record<string, unknown>): IExperimentRecord =>
  parseRecord(record(overrides));

const a = make({
  id: 'a00000000001',
  name: 'a',
  created_at: '2026-11-21T10:00:00.000Z'
});
const b = make({
  id: 'b00000000001',
  name: 'b',
  created_at: '2026-11-21T11:00:00.000Z'
});
const c = make({
  id: 'c00000000001',
  name: 'c',
  created_at: '2026-11-21T12:00:00.000Z'
});
const ids = (rows: readonly IExperimentRecord[]) => rows.map(row => row.id);

describe('loadTable', () => {
  it('sorts newest first whatever order the list came in', () => {
    expect(ids(loadTable([b, a, c]).rows)).toEqual([c.id, b.id, a.id]);
  });

  it('keeps one row per id, the last one listed', () => {
    const newer = { ...a, status: 'Running' as const };
    const table = loadTable([a, b, newer]);
    expect(ids(table.rows)).toEqual([b.id, a.id]);
    expect(table.rows[1].status).toBe('Running');
  });

  it('breaks equal creation times by id, which also sorts by time', () => {
    const same = '2026-11-21T10:00:00.000Z';
    const first = make({ id: '0mz8k3c2qf7a', created_at: same });
    const second = make({ id: '0mz8k3c2qf7b', created_at: same });
    expect(ids(loadTable([first, second]).rows)).toEqual([second.id, first.id]);
  });

  it('puts rows with an unreadable created_at last', () => {
    const odd = make({ id: 'z00000000001', created_at: 'yesterday' });
    expect(ids(loadTable([odd, a]).rows)).toEqual([a.id, odd.id]);
  });
});

describe('applyEvent', () => {
  const table = loadTable([a, c]);

  it('inserts a new record at its place by creation time', () => {
    const next = applyEvent(table, { kind: 'experiment', record: b });
    expect(ids(next.rows)).toEqual([c.id, b.id, a.id]);
    expect(ids(table.rows)).toEqual([c.id, a.id]); // the input is untouched
  });

  it('updates an existing record in place by id', () => {
    const running = {
      ...a,
      status: 'Running' as const,
      metrics: { loss: 0.5 }
    };
    const next = applyEvent(table, { kind: 'experiment', record: running });
    expect(ids(next.rows)).toEqual([c.id, a.id]);
    expect(next.rows[1]).toBe(running);
    expect(next.rows[0]).toBe(table.rows[0]);
  });

  it('re-sorts when an update changes the creation time', () => {
    const moved = { ...a, created_at: '2026-11-21T13:00:00.000Z' };
    const next = applyEvent(table, { kind: 'experiment', record: moved });
    expect(ids(next.rows)).toEqual([a.id, c.id]);
  });

  it('deletes by id', () => {
    const next = applyEvent(table, { kind: 'deleted', id: c.id });
    expect(ids(next.rows)).toEqual([a.id]);
  });

  it('returns the same table when deleting an unknown id', () => {
    expect(applyEvent(table, { kind: 'deleted', id: 'nope' })).toBe(table);
  });

  it('replays buffered events in order onto a freshly loaded list', () => {
    const events = [
      {
        kind: 'experiment' as const,
        record: { ...b, status: 'Running' as const }
      },
      {
        kind: 'experiment' as const,
        record: { ...b, status: 'Succeeded' as const }
      },
      { kind: 'deleted' as const, id: a.id },
      { kind: 'experiment' as const, record: a }
    ];
    const next = applyEvents(loadTable([a, b]), events);
    expect(ids(next.rows)).toEqual([b.id, a.id]);
    expect(next.rows[0].status).toBe('Succeeded');
  });

  it('starts from an empty table', () => {
    expect(
      applyEvent(EMPTY_TABLE, { kind: 'experiment', record: a }).rows
    ).toEqual([a]);
  });
});

describe('parseEvent', () => {
  it('parses an experiment event into a record', () => {
    const event = parseEvent(
      'experiment',
      JSON.stringify(record({ status: 'Running' }))
    );
    expect(event).toEqual({
      kind: 'experiment',
      record: expect.objectContaining({ id: '0mz8k3c2qf7a', status: 'Running' })
    });
  });

  it('parses a deleted event', () => {
    expect(parseEvent('deleted', '{"id": "0mz8k3c2qf7a"}')).toEqual({
      kind: 'deleted',
      id: '0mz8k3c2qf7a'
    });
  });

  it('ignores event names it does not know, so servers can add new ones', () => {
    expect(parseEvent('sweep', '{}')).toBeNull();
    expect(parseEvent('message', 'not json')).toBeNull();
  });

  it.each([
    [
      'invalid JSON',
      'experiment',
      '{not json',
      'experiment: data is not valid JSON'
    ],
    ['a non-object', 'experiment', '[]', 'experiment: expected a JSON object'],
    [
      'a deletion without id',
      'deleted',
      '{}',
      'deleted.id: expected a non-empty string'
    ],
    [
      'a numeric id',
      'deleted',
      '{"id": 7}',
      'deleted.id: expected a non-empty string'
    ],
    [
      'an empty id',
      'experiment',
      record({ id: '' }),
      'experiment.id: expected a non-empty'
    ],
    [
      'a null name',
      'experiment',
      record({ name: null }),
      'experiment.name: expected a non'
    ],
    [
      'an unknown status',
      'experiment',
      record({ status: 'Done' }),
      'experiment.status: expected'
    ],
    [
      'list metrics',
      'experiment',
      record({ metrics: [1] }),
      'experiment.metrics: expected a'
    ]
  ])('rejects %s, naming the field', (_label, name, data, message) => {
    const text = typeof data === 'string' ? data : JSON.stringify(data);
    expect(() => parseEvent(name, text)).toThrow(RecordFormatError);
    expect(() => parseEvent(name, text)).toThrow(message);
  });

  it('treats null metrics as none', () => {
    const event = parseEvent(
      'experiment',
      JSON.stringify(record({ metrics: null }))
    );
    expect(event?.kind === 'experiment' && event.record.metrics).toEqual({});
  });
});

describe('parseList', () => {
  it('parses the items of a list response', () => {
    expect(
      ids(parseList({ items: [record(), record({ id: 'x1' })], total: 2 }))
    ).toEqual(['0mz8k3c2qf7a', 'x1']);
  });

  it('names the field when items is missing', () => {
    expect(() => parseList({ total: 0 })).toThrow(
      'response.items: expected a list'
    );
  });

  it('names the index of a bad item', () => {
    expect(() => parseList({ items: [record(), { id: 'x' }] })).toThrow(
      'response.items[1].name: expected a non-empty string'
    );
  });
});

describe('elapsedSeconds', () => {
  const now = Date.parse('2026-11-21T12:00:30.000Z');

  it('is null before the run starts', () => {
    expect(elapsedSeconds(make({ status: 'Queued' }), now)).toBeNull();
  });

  it('ticks from started_at while running', () => {
    const running = make({
      status: 'Running',
      started_at: '2026-11-21T12:00:00.000Z'
    });
    expect(elapsedSeconds(running, now)).toBe(30);
  });

  it('trusts the server duration once finished', () => {
    const done = make({
      status: 'Succeeded',
      started_at: '2026-11-21T12:00:00.000Z',
      finished_at: '2026-11-21T12:00:05.000Z',
      duration: 4.5
    });
    expect(elapsedSeconds(done, now)).toBe(4.5);
  });

  it('computes a finished run without duration from its timestamps', () => {
    const done = make({
      status: 'Failed',
      started_at: '2026-11-21T12:00:00.000Z',
      finished_at: '2026-11-21T12:00:05.000Z'
    });
    expect(elapsedSeconds(done, now)).toBe(5);
  });
});

describe('formatting', () => {
  it.each([
    [null, '—'],
    [-1, '—'],
    [0, '0s'],
    [42.9, '42s'],
    [185, '3m 05s'],
    [2 * 3600 + 7 * 60, '2h 07m'],
    [3 * 86400 + 3600, '3d 01h']
  ])('formats a duration of %p seconds as %p', (seconds, text) => {
    expect(formatDuration(seconds)).toBe(text);
  });

  it('shows the first metric with its step', () => {
    expect(
      formatLatestMetric(
        make({ metrics: { loss: 0.123456, acc: 0.9 }, step: 10 })
      )
    ).toBe('loss 0.1235 @10');
  });

  it('shows very small and integer metrics readably', () => {
    expect(formatLatestMetric(make({ metrics: { lr: 0.00001234 } }))).toBe(
      'lr 1.234e-5'
    );
    expect(formatLatestMetric(make({ metrics: { epoch: 3 }, step: 0 }))).toBe(
      'epoch 3 @0'
    );
  });

  it('shows a dash without metrics', () => {
    expect(formatLatestMetric(make({}))).toBe('—');
  });
});

describe('name sort', () => {
  it('puts run-999 before run-2000', () => {
    const rows = loadTable(
      ['run-2000', 'run-999', 'run-2'].map((name, i) =>
        make({ id: `id${i}`, name })
      ),
      { column: 'name', descending: false }
    ).rows.map(r => r.name);
    expect(rows).toEqual(['run-2', 'run-999', 'run-2000']);
  });
});

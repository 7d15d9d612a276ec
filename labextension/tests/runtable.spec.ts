import { IExperimentRecord } from '../src/model';
import { naturalCompare, runRows } from '../src/runtable';
import { record } from './server';

function run(
  id: string,
  overrides: Record<string, unknown> = {}
): IExperimentRecord {
  return record({ id, name: id, ...overrides }) as unknown as IExperimentRecord;
}

const NONE = {
  pinned: [],
  collapsed: [],
  search: '',
  sort: null,
  frozen: null
};

const ids = (rows: ReturnType<typeof runRows>) =>
  rows.map(r => (r.kind === 'run' ? r.record.id : `sweep:${r.sweep}`));

describe('the compare run table', () => {
  it('sorts names as people read them', () => {
    const names = ['run-2000', 'run-999', 'run-2', 'Run-10'];
    expect(names.sort(naturalCompare)).toEqual([
      'run-2',
      'Run-10',
      'run-999',
      'run-2000'
    ]);
    const records = names.map(name => run(name));
    const sorted = runRows(records, {
      ...NONE,
      sort: { column: 'name', descending: true }
    });
    expect(ids(sorted)).toEqual(['run-2000', 'run-999', 'Run-10', 'run-2']);
  });

  it('sorts on a metric or a parameter, missing values last', () => {
    const records = [
      run('a', { metrics: { loss: 0.3 }, params: { lr: 'x' } }),
      run('b', { metrics: {}, params: { lr: 0.1 } }),
      run('c', { metrics: { loss: 0.1 }, params: {} })
    ];
    const by = (column: string, descending: boolean) =>
      ids(runRows(records, { ...NONE, sort: { column, descending } }));
    expect(by('metric:loss', false)).toEqual(['c', 'a', 'b']);
    expect(by('metric:loss', true)).toEqual(['a', 'c', 'b']);
    expect(by('param:lr', false)).toEqual(['b', 'a', 'c']);
  });

  it('pins ticked runs on top, and a search never hides them', () => {
    const records = ['a', 'b', 'c', 'd'].map(id => run(id));
    const rows = runRows(records, { ...NONE, pinned: ['c'], search: 'b' });
    expect(ids(rows)).toEqual(['c', 'b']);
  });

  it('shows the ticked runs alone when asked for the selected only', () => {
    const records = [
      run('a'),
      run('t1', { sweep: 's', trial: 1 }),
      run('b'),
      run('t0', { sweep: 's', trial: 0 })
    ];
    const rows = runRows(records, {
      ...NONE,
      pinned: ['b', 't0'],
      selectedOnly: true,
      sort: { column: 'name', descending: false }
    });
    expect(ids(rows)).toEqual(['b', 't0']);
    expect(rows.every(r => r.kind === 'run' && r.pinned)).toBe(true);
    expect(
      ids(runRows(records, { ...NONE, pinned: [], selectedOnly: true }))
    ).toEqual([]);
  });

  it('groups a sweep under a row that ticks every trial', () => {
    const records = [
      run('a'),
      run('t1', { sweep: 's', trial: 1 }),
      run('t0', { sweep: 's', trial: 0 })
    ];
    const rows = runRows(records, { ...NONE, pinned: ['t1'] });
    expect(ids(rows)).toEqual(['t1', 'a', 'sweep:s', 't0']);
    const group = rows[2];
    expect(group.kind === 'group' && group.ids).toEqual(['t1', 't0']);
    expect(ids(runRows(records, { ...NONE, collapsed: ['s'] }))).toEqual([
      'a',
      'sweep:s'
    ]);
  });

  it('keeps the rows in place while frozen: new runs wait', () => {
    const before = [run('b'), run('a')];
    const frozen = new Set(['a', 'b']);
    const after = [run('c'), ...before];
    expect(ids(runRows(after, { ...NONE, frozen }))).toEqual(['b', 'a']);
    expect(ids(runRows(after, NONE))).toEqual(['c', 'b', 'a']);
  });
});

import { RecordFormatError } from '../src/model';
import {
  applySweep,
  formatBest,
  formatProgress,
  parameterNames,
  parseSweep,
  parseSweepDetail,
  progressFraction,
  ITrialRow,
  lineageText,
  shownObjective,
  sortTrials,
  trialStatusText
} from '../src/sweeps';

const sweep = (overrides: Record<string, unknown> = {}) =>
  parseSweep({
    id: 's1',
    name: 'lr-search',
    status: 'Running',
    reason: 'running',
    objective: { metric: 'loss', direction: 'minimize' },
    tuner: 'tpe',
    max_trials: 10,
    max_duration: null,
    concurrency: 2,
    counts: { running: 2, succeeded: 3 },
    trials_started: 5,
    finished: 3,
    best: { trial: 2, id: 'r2', value: 0.123456, params: { lr: 0.01 } },
    created_at: '2026-11-21T10:00:00Z',
    finished_at: null,
    duration: 12,
    ...overrides
  });

describe('sweeps', () => {
  it('shows progress against the budget and the best trial', () => {
    const s = sweep();
    expect(formatProgress(s)).toBe('3/10');
    expect(progressFraction(s)).toBe(0.3);
    expect(formatBest(s)).toBe('best loss 0.1235 (#2)');
  });

  it('has no fraction without a trial budget and says when nothing finished', () => {
    const s = sweep({ max_trials: null, best: null });
    expect(formatProgress(s)).toBe('3/5');
    expect(progressFraction(s)).toBeNull();
    expect(formatBest(s)).toBe('no result yet');
  });

  it('replaces a sweep by id, newest first', () => {
    const older = sweep({ id: 's0', created_at: '2026-11-20T10:00:00Z' });
    const list = applySweep(applySweep([], older), sweep());
    expect(list.map(s => s.id)).toEqual(['s1', 's0']);
    const done = sweep({ status: 'Succeeded' });
    const next = applySweep(list, done);
    expect(next.map(s => s.status)).toEqual(['Succeeded', 'Running']);
  });

  it('refuses records without the fields the panel needs', () => {
    expect(() => parseSweep({ id: 's', name: 'n', status: 'Running' })).toThrow(
      RecordFormatError
    );
    expect(() => parseSweep([])).toThrow('sweep: expected a JSON object');
    expect(() => parseSweepDetail({ ...sweep(), trials: null })).toThrow(
      'sweep.trials'
    );
  });

  it('lists parameter names in first-seen order', () => {
    const rows = [
      { trial: 0, params: { lr: 1, act: 'relu' } },
      { trial: 1, params: { act: 'tanh', dropout: 0.1 } }
    ].map(r => ({
      ...r,
      id: null,
      status: 'Succeeded',
      result: 'complete',
      objective: 1,
      metrics: {}
    }));
    expect(parameterNames(rows)).toEqual(['lr', 'act', 'dropout']);
  });
});

describe('a trial in the trials table', () => {
  const trial = (overrides: Partial<ITrialRow>): ITrialRow => ({
    id: 't',
    trial: 3,
    status: 'Pruned',
    result: 'pruned',
    objective: null,
    params: {},
    metrics: { loss: 0.42 },
    ...overrides
  });

  it('shows a pruned trial its last value, marked as such', () => {
    expect(shownObjective(trial({}), 'loss')).toEqual({
      value: 0.42,
      last: true
    });
    expect(shownObjective(trial({ objective: 0.1 }), 'loss')).toEqual({
      value: 0.1,
      last: false
    });
    expect(shownObjective(trial({ metrics: {} }), 'loss').value).toBeNull();
  });

  it('says Pruned, not Pruned (pruned)', () => {
    expect(trialStatusText(trial({}))).toBe('Pruned');
    expect(
      trialStatusText(trial({ status: 'Succeeded', result: 'complete' }))
    ).toBe('Succeeded');
    expect(trialStatusText(trial({ status: 'Failed', result: 'error' }))).toBe(
      'Failed (error)'
    );
  });
});

describe('a PBT member in the trials table', () => {
  const member = (
    trial: number,
    generation: number,
    parent: number | null
  ): ITrialRow => ({
    id: `r${trial}`,
    trial,
    status: 'Succeeded',
    result: 'complete',
    objective: 1,
    params: {},
    metrics: {},
    lineage: {
      generation,
      member: trial % 2,
      parent,
      start_step: 3 * generation
    }
  });

  it('names its generation and the trial it went on from', () => {
    expect(lineageText(member(0, 0, null).lineage)).toBe('g0');
    expect(lineageText(member(3, 1, 1).lineage)).toBe('g1 ← #1');
    expect(lineageText(undefined)).toBe('');
  });

  it('sorts by generation, then by trial', () => {
    const rows = [
      member(2, 1, 0),
      member(0, 0, null),
      member(3, 1, 0),
      member(1, 0, null)
    ];
    const sorted = sortTrials(rows, { key: 'lineage', descending: true });
    expect(sorted.map(t => t.trial)).toEqual([2, 3, 0, 1]);
  });
});

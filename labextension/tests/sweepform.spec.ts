import {
  buildSweepSpec,
  defaultSweepForm,
  sweepFieldForPath
} from '../src/sweepform';
import { groupByField } from '../src/submitform';
import { choiceValues, sortTrials, ITrialRow } from '../src/sweeps';

describe('the sweep form', () => {
  it('builds a spec with the space as typed and whole numbers as numbers', () => {
    const form = {
      ...defaultSweepForm('mnist', 'python train.py'),
      space: 'x: {_type: uniform, _value: [0, 1]}',
      earlyStopping: 'median'
    };
    expect(buildSweepSpec(form)).toEqual({
      name: 'mnist',
      space: 'x: {_type: uniform, _value: [0, 1]}',
      tuner: 'tpe',
      objective: { metric: 'loss', direction: 'minimize' },
      max_trials: 10,
      concurrency: 2,
      early_stopping: 'median',
      trial: { command: 'python train.py', resources: { gpus: 0 } }
    });
  });

  it('leaves a bad number as typed for the server to name, and drops an empty one', () => {
    const spec = buildSweepSpec({
      ...defaultSweepForm('s', 'c'),
      maxTrials: 'lots',
      concurrency: ' '
    });
    expect(spec.max_trials).toBe('lots');
    expect('concurrency' in spec).toBe(false);
    expect('early_stopping' in spec).toBe(false);
  });

  it("puts the server's errors next to their fields", () => {
    expect(sweepFieldForPath('space.lr._value')).toBe('space');
    expect(sweepFieldForPath('space')).toBe('space');
    expect(sweepFieldForPath('trial.command')).toBe('command');
    expect(sweepFieldForPath('trial.resources.gpus')).toBe('gpus');
    expect(sweepFieldForPath('objective.direction')).toBe('direction');
    expect(sweepFieldForPath('objective.metric')).toBe('metric');
    expect(sweepFieldForPath('max_trials')).toBe('maxTrials');
    expect(sweepFieldForPath('tuner.args.seed')).toBe('tuner');
    expect(sweepFieldForPath('body')).toBe('general');
    expect(
      groupByField(
        [{ path: 'space.x', reason: 'unknown _type' }],
        sweepFieldForPath
      )
    ).toEqual({ space: ['space.x: unknown _type'] });
  });
});

describe('trials', () => {
  const row = (
    trial: number,
    objective: number | null,
    params: Record<string, unknown>
  ): ITrialRow => ({
    id: `t${trial}`,
    trial,
    status: 'Succeeded',
    result: 'complete',
    objective,
    params,
    metrics: {}
  });
  const trials = [
    row(0, 0.5, { opt: 'sgd', bs: 64 }),
    row(1, null, { opt: 'adam', bs: 128 }),
    row(2, 0.1, { opt: 'adam', bs: 32 })
  ];

  it('sort by the objective with missing values last either way', () => {
    const key = 'objective';
    expect(
      sortTrials(trials, { key, descending: false }).map(t => t.trial)
    ).toEqual([2, 0, 1]);
    expect(
      sortTrials(trials, { key, descending: true }).map(t => t.trial)
    ).toEqual([0, 2, 1]);
  });

  it('sort by a parameter: numbers numerically, text as text, ties by number', () => {
    expect(
      sortTrials(trials, { key: 'param:bs', descending: false }).map(
        t => t.trial
      )
    ).toEqual([2, 0, 1]);
    expect(
      sortTrials(trials, { key: 'param:opt', descending: false }).map(
        t => t.trial
      )
    ).toEqual([1, 2, 0]);
  });

  it("read the choice parameters' options from the spec", () => {
    expect(
      choiceValues({
        space: {
          bs: { _type: 'choice', _value: [32, 64] },
          lr: { _type: 'loguniform', _value: [0.001, 0.1] }
        }
      })
    ).toEqual({ bs: [32, 64] });
    expect(choiceValues({ space: null })).toEqual({});
  });
});

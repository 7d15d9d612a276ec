import { GAP_X, IPipelineStep, layout, NODE_W } from '../src/pipelinegraph';

function step(name: string, dependsOn: string[] = []): IPipelineStep {
  return {
    name,
    kind: 'experiment',
    state: 'waiting',
    id: null,
    attempt: 0,
    reason: '',
    cached: false,
    depends_on: dependsOn
  };
}

describe('layout', () => {
  it('puts a step one column right of its deepest dependency', () => {
    const places = layout([
      step('tune'),
      step('data'),
      step('train', ['tune', 'data']),
      step('eval', ['train']),
      step('report', ['tune', 'eval'])
    ]);
    const column = Object.fromEntries(
      places.map(p => [p.step.name, p.x / (NODE_W + GAP_X)])
    );
    expect(column).toEqual({ tune: 0, data: 0, train: 1, eval: 2, report: 3 });
    const rows = places.filter(p => p.x === 0).map(p => p.y);
    expect(new Set(rows).size).toBe(2); // two roots, one below the other
  });

  it('ignores names it does not know and survives a cycle', () => {
    const places = layout([step('a', ['b', 'ghost']), step('b', ['a'])]);
    expect(places.map(p => p.step.name)).toEqual(['a', 'b']);
    expect(places.every(p => Number.isFinite(p.x))).toBe(true);
  });
});

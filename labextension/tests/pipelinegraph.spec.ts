import {
  fitText,
  INodePlace,
  IPipelineStep,
  layout,
  NODE_H,
  NODE_W
} from '../src/pipelinegraph';

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

function overlap(
  a: { x: number; y: number },
  b: { x: number; y: number }
): boolean {
  return Math.abs(a.x - b.x) < NODE_W && Math.abs(a.y - b.y) < NODE_H;
}

describe('layout', () => {
  it('puts every step right of its dependencies, no two nodes overlapping', () => {
    const steps = [
      step('tune'),
      step('data'),
      step('train', ['tune', 'data']),
      step('eval', ['train']),
      step('report', ['tune', 'eval'])
    ];
    const graph = layout(steps);
    const at = new Map(graph.nodes.map(p => [p.step.name, p]));
    for (const s of steps) {
      for (const dep of s.depends_on) {
        expect(at.get(dep)!.x + NODE_W).toBeLessThan(at.get(s.name)!.x);
      }
    }
    for (const a of graph.nodes) {
      for (const b of graph.nodes) {
        if (a !== b) {
          expect(overlap(a, b)).toBe(false);
        }
      }
    }
    for (const p of graph.nodes) {
      expect(p.x).toBeGreaterThanOrEqual(0);
      expect(p.x + NODE_W).toBeLessThanOrEqual(graph.width);
      expect(p.y + NODE_H).toBeLessThanOrEqual(graph.height);
    }
  });

  it('routes one edge per dependency, from the dependency to the step', () => {
    const graph = layout([step('a'), step('b', ['a', 'a']), step('c', ['a'])]);
    const pairs = graph.edges.map(e => `${e.from}->${e.to}`).sort();
    expect(pairs).toEqual(['a->b', 'a->c']);
    for (const edge of graph.edges) {
      expect(edge.points.length).toBeGreaterThanOrEqual(2);
      const box = (name: string) =>
        graph.nodes.find(n => n.step.name === name)!;
      const within = (p: { x: number; y: number }, b: INodePlace) =>
        p.x >= b.x - 1 &&
        p.x <= b.x + NODE_W + 1 &&
        p.y >= b.y - 1 &&
        p.y <= b.y + NODE_H + 1;
      expect(within(edge.points[0], box(edge.from))).toBe(true);
      expect(within(edge.points[edge.points.length - 1], box(edge.to))).toBe(
        true
      );
    }
  });

  it('ignores names it does not know and survives a cycle', () => {
    const graph = layout([step('a', ['b', 'ghost']), step('b', ['a'])]);
    expect(graph.nodes.map(p => p.step.name)).toEqual(['a', 'b']);
    expect(graph.edges).toHaveLength(2);
    expect(
      graph.nodes.every(p => Number.isFinite(p.x) && Number.isFinite(p.y))
    ).toBe(true);
  });
});

describe('fitText', () => {
  it('keeps a line that fits and cuts a longer one with an ellipsis', () => {
    expect(fitText('experiment · succeeded', 6.2)).toBe(
      'experiment · succeeded'
    );
    const long = fitText('experiment · succeeded (cached) and more', 6.2);
    expect(long.endsWith('…')).toBe(true);
    expect(long.length).toBe(Math.floor((NODE_W - 16) / 6.2));
  });
});

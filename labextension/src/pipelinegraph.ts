/**
 * The pipeline graph's model, kept free of JupyterLab so jest can run it: the records the
 * REST API sends, the colour of each step state, and where each step's node goes (by
 * depth: a step sits one column right of its deepest dependency).
 */

export interface IPipelineStep {
  name: string;
  kind: 'experiment' | 'sweep';
  state: string;
  id: string | null;
  attempt: number;
  reason: string;
  cached: boolean;
  depends_on: string[];
}

export interface IPipelineRecord {
  id: string;
  name: string;
  status: string;
  reason: string;
  created_at: string;
  steps: IPipelineStep[];
}

export const STEP_COLORS: Record<string, string> = {
  succeeded: '#1a7f37',
  failed: '#cf222e',
  running: '#0969da',
  submitting: '#0969da',
  stopped: '#6e7781',
  waiting: '#d0d7de'
};

export const NODE_W = 120;
export const NODE_H = 34;
export const GAP_X = 36;
const GAP_Y = 12;

export interface INodePlace {
  step: IPipelineStep;
  x: number;
  y: number;
}

/** Steps placed by depth: a step's column is one more than its deepest dependency's. */
export function layout(steps: IPipelineStep[]): INodePlace[] {
  const byName = new Map(steps.map(s => [s.name, s]));
  const depth = new Map<string, number>();
  const depthOf = (name: string, seen: Set<string>): number => {
    const known = depth.get(name);
    if (known !== undefined) {
      return known;
    }
    seen.add(name);
    const deps = (byName.get(name)?.depends_on ?? []).filter(
      d => byName.has(d) && !seen.has(d)
    );
    const value = deps.length
      ? 1 + Math.max(...deps.map(d => depthOf(d, seen)))
      : 0;
    depth.set(name, value);
    return value;
  };
  const rows = new Map<number, number>();
  return steps.map(step => {
    const column = depthOf(step.name, new Set());
    const row = rows.get(column) ?? 0;
    rows.set(column, row + 1);
    return {
      step,
      x: column * (NODE_W + GAP_X),
      y: row * (NODE_H + GAP_Y)
    };
  });
}

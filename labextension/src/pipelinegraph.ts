/**
 * The pipeline graph's model, kept free of JupyterLab so jest can run it: the records the
 * REST API sends, the colour of each step state, and where each step's node goes (laid out
 * by dagre, dependencies to the left).
 */
import dagre, { EdgeLabel, GraphLabel, NodeLabel } from '@dagrejs/dagre';

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

export const NODE_W = 168;

/** A node's line cut to what fits its width (the full text is the node's tooltip); `charWidth`
 *  is the font's average advance in pixels. */
export function fitText(text: string, charWidth: number): string {
  const room = Math.floor((NODE_W - 16) / charWidth);
  return text.length <= room ? text : `${text.slice(0, room - 1)}…`;
}
export const NODE_H = 36;
const RANK_GAP = 40;
const NODE_GAP = 14;

export interface INodePlace {
  step: IPipelineStep;
  /** The node's top-left corner. */
  x: number;
  y: number;
}

export interface IEdgePlace {
  from: string;
  to: string;
  /** The edge's route, as dagre draws it around the nodes between. */
  points: { x: number; y: number }[];
}

export interface IGraphLayout {
  nodes: INodePlace[];
  edges: IEdgePlace[];
  width: number;
  height: number;
}

/**
 * Steps laid out left to right by dagre (ranks by dependency, crossings minimised, edges
 * routed around nodes). Dependencies on names the pipeline lacks are left out; a cycle
 * (which the server refuses, but a record could still carry) is broken by dagre.
 */
export function layout(steps: IPipelineStep[]): IGraphLayout {
  const graph = new dagre.graphlib.Graph<GraphLabel, NodeLabel, EdgeLabel>();
  graph.setGraph({
    rankdir: 'LR',
    ranksep: RANK_GAP,
    nodesep: NODE_GAP,
    marginx: 1,
    marginy: 1
  });
  graph.setDefaultEdgeLabel(() => ({}));
  const known = new Set(steps.map(s => s.name));
  for (const step of steps) {
    graph.setNode(step.name, { width: NODE_W, height: NODE_H });
  }
  for (const step of steps) {
    for (const dep of new Set(step.depends_on)) {
      if (known.has(dep) && dep !== step.name) {
        graph.setEdge(dep, step.name);
      }
    }
  }
  dagre.layout(graph);
  const nodes = steps.map(step => {
    const at = graph.node(step.name);
    return { step, x: (at.x ?? 0) - NODE_W / 2, y: (at.y ?? 0) - NODE_H / 2 };
  });
  const edges = graph.edges().map(e => ({
    from: e.v,
    to: e.w,
    points: (graph.edge(e).points ?? []).map(p => ({ x: p.x, y: p.y }))
  }));
  const label = graph.graph();
  return {
    nodes,
    edges,
    width: Math.ceil(label.width ?? 0),
    height: Math.ceil(label.height ?? 0)
  };
}

/** `GET kubelab/api/diff?a=&b=` (kubelab/run_diff.py): what differs between two runs. */
export interface IRunSide {
  id: string;
  name: string;
  status: string;
}

export interface IChanged {
  name: string;
  a: unknown;
  b: unknown;
  delta?: number | null;
}

export interface IGit {
  commit?: string;
  dirty?: boolean;
}

export interface IRunDiff {
  a: IRunSide;
  b: IRunSide;
  params: IChanged[];
  metrics: IChanged[];
  environment: {
    recorded: Record<string, boolean>;
    python: { a: string | null; b: string | null };
    packages: {
      added: Record<string, string>;
      removed: Record<string, string>;
      changed: Record<string, [string, string]>;
    };
    gpu?: { a: unknown; b: unknown };
    image?: { a: unknown; b: unknown };
    git: { a: IGit | null; b: IGit | null };
  };
  code: { path: string; change: string; text?: string; notebook?: boolean }[];
}

/**
 * Services as the sidebar shows them (`GET kubelab/api/services`, `event: service`), and the
 * Try-it panel's request body: an Open Inference Protocol v2 request shaped from the model's
 * own metadata (`GET …/v2/models/<name>`) where the model server declares its inputs.
 */
import { RecordFormatError } from './model';

export interface IServiceReplica {
  index: number;
  state: string;
  port?: number | null;
  restarts?: number;
  name?: string;
}

/** What the service records it serves: a run's file, a sweep's trial, a predictor class. */
export interface IServiceLineage {
  run?: string;
  run_name?: string;
  file?: string;
  sweep?: string | null;
  trial?: number | null;
  predictor?: string;
}

/** What the Jupyter server's proxy measured of the service's requests in the last minute. */
export interface IServiceStats {
  window_s: number;
  requests: number;
  /** Requests per second. */
  rate: number;
  p50_ms: number | null;
  p95_ms: number | null;
  /** 5xx answers and requests no replica took. */
  errors: number;
}

export interface IServiceRecord {
  id: string;
  name: string;
  version: string;
  /** `model` (answers the v2 protocol at `endpoint`) or `command` (any server). */
  kind: string;
  state: string;
  reason: string;
  /** This machine's proxy path (`/kubelab/services/<id>/`), or the in-cluster URL. */
  url: string;
  endpoint: string;
  replicas: IServiceReplica[];
  replicas_wanted?: { min: number; max: number } | null;
  lineage: IServiceLineage;
  /** On a cluster: this version's share of the service's traffic, and of its mirror. */
  traffic?: number;
  mirror?: number;
  backend?: string;
  created_at: string;
  /** In the REST answers only (events carry none): see `applyService`. */
  stats?: IServiceStats;
}

export const SERVICE_ENDED: ReadonlySet<string> = new Set([
  'Stopped',
  'Failed'
]);

export function parseService(value: unknown): IServiceRecord {
  const body = value as Record<string, unknown> | null;
  for (const key of ['id', 'name', 'state', 'url']) {
    if (typeof body?.[key] !== 'string') {
      throw new RecordFormatError(`service.${key}`, 'expected a string');
    }
  }
  const record = body as unknown as IServiceRecord;
  return {
    ...record,
    version: String(record.version ?? ''),
    kind: record.kind ?? 'command',
    reason: record.reason ?? '',
    endpoint: record.endpoint ?? '',
    replicas: Array.isArray(record.replicas) ? record.replicas : [],
    lineage: record.lineage ?? {},
    created_at: String(record.created_at ?? '')
  };
}

/** The list with `record` added or replaced, newest first. */
export function applyService(
  services: readonly IServiceRecord[],
  record: IServiceRecord
): IServiceRecord[] {
  const old = services.find(service => service.id === record.id);
  const rest = services.filter(service => service.id !== record.id);
  const kept =
    record.stats === undefined && old?.stats !== undefined
      ? { ...record, stats: old.stats } // an event's view: the last figures stay until the next list
      : record;
  return [...rest, kept].sort((a, b) =>
    a.created_at === b.created_at
      ? b.id.localeCompare(a.id)
      : b.created_at.localeCompare(a.created_at)
  );
}

export function removeService(
  services: readonly IServiceRecord[],
  id: string
): IServiceRecord[] {
  return services.filter(service => service.id !== id);
}

/** The versions of the service `name` (a cluster's, which carry a traffic share), oldest first. */
export function serviceVersions(
  services: readonly IServiceRecord[],
  name: string
): IServiceRecord[] {
  return services
    .filter(s => s.name === name && s.traffic !== undefined)
    .sort((a, b) => a.created_at.localeCompare(b.created_at));
}

/**
 * The traffic form's text as the request's percents: a whole number as a number, anything
 * else as typed (the server names the field and the reason), an empty field left out (that
 * version takes the rest).
 */
export function trafficShares(
  typed: Record<string, string>
): Record<string, number | string> {
  const shares: Record<string, number | string> = {};
  for (const [version, text] of Object.entries(typed)) {
    const value = text.trim().replace(/%$/, '');
    if (value !== '') {
      shares[version] = /^\d+$/.test(value) ? Number(value) : value;
    }
  }
  return shares;
}

/** The version the service's requests are copied to now, and the share copied; none: undefined. */
export function currentMirror(
  versions: readonly IServiceRecord[]
): { version: string; percent: number } | undefined {
  const to = versions.find(version => (version.mirror ?? 0) > 0);
  return to ? { version: to.version, percent: to.mirror ?? 0 } : undefined;
}

/**
 * The traffic form's mirror choice as the request's `mirror`: no version chosen sends `{}`
 * (requests are copied nowhere), else the version's percent as `trafficShares` reads it,
 * an empty one sent as typed so that the server names the field.
 */
export function mirrorShares(
  version: string,
  percent: string
): Record<string, number | string> {
  if (version === '') {
    return {};
  }
  const value = percent.trim().replace(/%$/, '');
  return { [version]: /^\d+$/.test(value) ? Number(value) : value };
}

/** A version's row: `mirror 100%` while it gets a copy of the service's requests, else ''. */
export function formatMirror(service: IServiceRecord): string {
  return (service.mirror ?? 0) > 0 ? `mirror ${service.mirror}%` : '';
}

/** `ready/running` replicas, e.g. `2/2`. */
export function formatReplicas(service: IServiceRecord): string {
  const ready = service.replicas.filter(r => r.state === 'Ready').length;
  return `${ready}/${service.replicas.length}`;
}

/** A number as the sidebar shows it: one decimal below 10, whole above (`0.4`, `3.2`, `120`). */
function figure(value: number): string {
  return value < 10 ? value.toFixed(1) : Math.round(value).toString();
}

/**
 * The last minute's traffic in a few words: `3.2 req/s · p50 12 ms`, with the failures when
 * there were some (`· 2 errors`); `no requests yet` when none came through the proxy.
 */
export function formatTraffic(stats: IServiceStats | undefined): string {
  if (!stats || stats.requests === 0) {
    return 'no requests yet';
  }
  const parts = [`${figure(stats.rate)} req/s`];
  if (stats.p50_ms !== null) {
    parts.push(`p50 ${figure(stats.p50_ms)} ms`);
  }
  if (stats.errors > 0) {
    parts.push(stats.errors === 1 ? '1 error' : `${stats.errors} errors`);
  }
  return parts.join(' · ');
}

/** The title beside it: the window, the count and p95. */
export function describeTraffic(stats: IServiceStats | undefined): string {
  if (!stats || stats.requests === 0) {
    return 'no request through the proxy in the last minute';
  }
  const p95 = stats.p95_ms === null ? '' : `, p95 ${figure(stats.p95_ms)} ms`;
  return `${stats.requests} requests in the last ${Math.round(stats.window_s)} s${p95}`;
}

/** What it serves, in a few words: `run 1m8b… outputs/model.joblib`, `sweep s1 trial #2`. */
export function formatLineage(lineage: IServiceLineage): string {
  const parts: string[] = [];
  if (lineage.sweep) {
    parts.push(`sweep ${lineage.sweep}`);
    if (lineage.trial !== null && lineage.trial !== undefined) {
      parts.push(`trial #${lineage.trial}`);
    }
  } else if (lineage.run) {
    parts.push(`run ${lineage.run_name || lineage.run}`);
  }
  if (lineage.file) {
    parts.push(lineage.file);
  }
  if (lineage.predictor) {
    parts.push(lineage.predictor);
  }
  return parts.join(' · ');
}

/** The path (under the server's base URL) at which Jupyter forwards to the service. */
export function proxyPath(service: IServiceRecord, rest = ''): string {
  return `kubelab/services/${encodeURIComponent(service.id)}/${rest}`;
}

/** The model's metadata path (`v2/models/<name>`), beside its `…/infer` endpoint. */
export function metadataPath(service: IServiceRecord): string {
  return service.endpoint.replace(/\/infer$/, '');
}

interface ITensorMetadata {
  name?: unknown;
  datatype?: unknown;
  shape?: unknown;
}

/**
 * A v2 inference request to edit: one tensor per input the metadata declares (its name,
 * datatype and shape, a variable dimension given 1, filled with zeros), or a one-row FP64
 * tensor when the model server declares none (scikit-learn's runtime does not).
 */
export function inferenceBody(metadata: unknown): Record<string, unknown> {
  const declared = (metadata as { inputs?: unknown } | null)?.inputs;
  const inputs = Array.isArray(declared)
    ? (declared as ITensorMetadata[]).filter(i => typeof i?.name === 'string')
    : [];
  if (inputs.length === 0) {
    return {
      inputs: [{ name: 'input-0', shape: [1, 1], datatype: 'FP64', data: [0] }]
    };
  }
  return {
    inputs: inputs.map(input => {
      const shape = (Array.isArray(input.shape) ? input.shape : [1]).map(d =>
        typeof d === 'number' && d > 0 ? d : 1
      );
      const size = shape.reduce((a, b) => a * b, 1);
      const datatype =
        typeof input.datatype === 'string' ? input.datatype : 'FP64';
      const zero = datatype === 'BYTES' ? '' : datatype === 'BOOL' ? false : 0;
      return {
        name: input.name,
        shape,
        datatype,
        data: new Array(size).fill(zero)
      };
    })
  };
}

/** A service name (a DNS label) suggested from a sweep's or run's name: `Iris C_2` → `iris-c-2`. */
export function serviceName(name: string): string {
  const label = name
    .toLowerCase()
    .replace(/[^a-z0-9-]+/g, '-')
    .replace(/^[^a-z]+/, '')
    .slice(0, 40)
    .replace(/-+$/, '');
  return label || 'model';
}

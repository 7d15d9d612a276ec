/**
 * A run's use of the machine as the views show it: the record's `system` sums as table
 * columns (Compare, a sweep's trials) and `GET experiments/<id>/system` as chart data. Pure,
 * so jest runs it; `systemcharts.tsx` draws it. A value nothing measured is `—`, never 0.
 */
import { TranslationBundle } from '@jupyterlab/translation';

import { formatNumber, RecordFormatError } from './model';

/** The record's `system` section (kubelab/system_metrics.py SYSTEM_FIELDS). */
export interface ISystemSums {
  gpu_hours?: number | null;
  energy_wh?: number | null;
  gpu_util?: number | null;
  gpu_util_p95?: number | null;
  gpu_memory_peak_mib?: number | null;
  cpu_percent?: number | null;
  rss_peak_mib?: number | null;
}

export type SystemKey = keyof ISystemSums;

/** The columns tables offer, in this order, each shown where some run measured it. */
export const SYSTEM_COLUMNS: readonly SystemKey[] = [
  'gpu_util',
  'energy_wh',
  'gpu_memory_peak_mib'
];

/** A column's header. */
export function systemLabel(key: SystemKey, trans: TranslationBundle): string {
  switch (key) {
    case 'gpu_util':
      return trans.__('GPU util');
    case 'energy_wh':
      return trans.__('Energy');
    case 'gpu_memory_peak_mib':
      return trans.__('Peak GPU memory');
    default:
      return key;
  }
}

/** A record or trial row: the server sends the `system` sums on each (run_record.py). */
type WithSystem = { system?: ISystemSums | null };

/** A record's measured value, or null (nothing measured: no GPU, simulated GPUs). */
export function systemValue(record: object, key: SystemKey): number | null {
  const value = (record as WithSystem).system?.[key];
  return typeof value === 'number' && Number.isFinite(value) ? value : null;
}

/** The system columns some of `records` have a value for. */
export function measuredColumns(records: readonly object[]): SystemKey[] {
  return SYSTEM_COLUMNS.filter(key =>
    records.some(record => systemValue(record, key) !== null)
  );
}

/** A value in its unit: `87%`, `12.5 Wh`, `10 GiB`; `—` for none. */
export function formatSystem(key: SystemKey, value: number | null): string {
  if (value === null) {
    return '—';
  }
  switch (key) {
    case 'gpu_util':
    case 'gpu_util_p95':
    case 'cpu_percent':
      return `${Math.round(value)}%`;
    case 'energy_wh':
      return value >= 1000
        ? `${formatNumber(value / 1000)} kWh`
        : `${formatNumber(value)} Wh`;
    case 'gpu_hours':
      return `${formatNumber(value)} GPU-h`;
    default:
      return value >= 1024
        ? `${formatNumber(value / 1024)} GiB`
        : `${Math.round(value)} MiB`;
  }
}

/** One GPU's series; null where it reported nothing in that stretch of time. */
export interface IGpuSeries {
  index: number;
  util: (number | null)[];
  memory_mib: (number | null)[];
  power_w: (number | null)[];
}

/** `GET experiments/<id>/system`. */
export interface ISystemRead {
  summary: ISystemSums & {
    samples?: number;
    missing?: Record<string, string>;
    notice?: string;
  };
  series: {
    time: number[];
    gpus: IGpuSeries[];
    cpu_percent: (number | null)[];
    rss_mib: (number | null)[];
  };
}

export function parseSystem(value: unknown): ISystemRead {
  const body = value as Partial<ISystemRead> | null;
  const series = body?.series;
  if (
    typeof body?.summary !== 'object' ||
    !series ||
    !Array.isArray(series.time) ||
    !Array.isArray(series.gpus)
  ) {
    throw new RecordFormatError('system', 'expected {summary, series}');
  }
  return body as ISystemRead;
}

export type GpuField = 'util' | 'memory_mib' | 'power_w';

/** The charts of the System section, in this order. */
export const SYSTEM_CHARTS: readonly GpuField[] = [
  'util',
  'memory_mib',
  'power_w'
];

/** A chart's caption. */
export function chartTitle(field: GpuField, trans: TranslationBundle): string {
  switch (field) {
    case 'util':
      return trans.__('GPU utilisation (%)');
    case 'memory_mib':
      return trans.__('GPU memory (MiB)');
    default:
      return trans.__('GPU power (W)');
  }
}

/** uPlot's columns for one field: the times, then one column per GPU that reported it. */
export function gpuChart(
  read: ISystemRead,
  field: GpuField
): { data: [number[], ...(number | null)[][]]; labels: string[] } {
  const gpus = read.series.gpus.filter(gpu =>
    gpu[field].some(value => value !== null)
  );
  return {
    data: [read.series.time, ...gpus.map(gpu => gpu[field])],
    labels: gpus.map(gpu => `GPU ${gpu.index}`)
  };
}

/** One line of the sums: `GPU 87% mean (p95 95%) · 1.2 GPU-h · 250 Wh · peak 10 GiB`. */
export function summaryLine(summary: ISystemRead['summary']): string {
  const value = (key: SystemKey) => systemValue({ system: summary }, key);
  const parts: string[] = [];
  const util = value('gpu_util');
  if (util !== null) {
    const p95 = value('gpu_util_p95');
    parts.push(
      `GPU ${formatSystem('gpu_util', util)} mean` +
        (p95 !== null ? ` (p95 ${formatSystem('gpu_util', p95)})` : '')
    );
  }
  for (const key of ['gpu_hours', 'energy_wh'] as SystemKey[]) {
    if (value(key) !== null) {
      parts.push(formatSystem(key, value(key)));
    }
  }
  if (value('gpu_memory_peak_mib') !== null) {
    parts.push(
      `peak GPU memory ${formatSystem('gpu_memory_peak_mib', value('gpu_memory_peak_mib'))}`
    );
  }
  if (value('cpu_percent') !== null) {
    parts.push(`CPU ${formatSystem('cpu_percent', value('cpu_percent'))}`);
  }
  return parts.join(' · ');
}

/** `GET usage?since=7d`: the user's own runs summed since then. */
export interface IUsage {
  since: string;
  runs: number;
  gpu_hours: number;
  energy_wh: number;
  gpu_util: number | null;
}

export function parseUsage(value: unknown): IUsage {
  const body = value as Partial<IUsage> | null;
  if (
    typeof body?.runs !== 'number' ||
    typeof body.gpu_hours !== 'number' ||
    typeof body.energy_wh !== 'number'
  ) {
    throw new RecordFormatError(
      'usage',
      'expected {runs, gpu_hours, energy_wh}'
    );
  }
  return body as IUsage;
}

/** "My usage" in one line: `3.2 GPU-h · 812 Wh · GPU 61% mean · 14 runs`. */
export function usageLine(usage: IUsage, trans: TranslationBundle): string {
  const parts = [
    formatSystem('gpu_hours', usage.gpu_hours),
    formatSystem('energy_wh', usage.energy_wh)
  ];
  if (typeof usage.gpu_util === 'number') {
    parts.push(
      trans.__('GPU %1 mean', formatSystem('gpu_util', usage.gpu_util))
    );
  }
  parts.push(trans._n('%1 run', '%1 runs', usage.runs));
  return parts.join(' · ');
}

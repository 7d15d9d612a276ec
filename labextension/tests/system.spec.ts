import { IExperimentRecord } from '../src/model';
import { runRows } from '../src/runtable';
import { ITrialRow, sortTrials } from '../src/sweeps';
import {
  formatSystem,
  gpuChart,
  measuredColumns,
  parseSystem,
  parseUsage,
  summaryLine,
  usageLine
} from '../src/system';
import { record } from './server';

function run(id: string, system: Record<string, number | null> | null) {
  return record({ id, name: id, system }) as unknown as IExperimentRecord;
}

describe('system columns and charts', () => {
  it('offers only the columns some run measured, and formats each in its unit', () => {
    const runs = [
      run('a', { gpu_util: 87.4, energy_wh: null, gpu_memory_peak_mib: null }),
      run('b', null)
    ];
    expect(measuredColumns(runs)).toEqual(['gpu_util']);
    expect(formatSystem('gpu_util', 87.4)).toBe('87%');
    expect(formatSystem('energy_wh', 12.25)).toBe('12.25 Wh');
    expect(formatSystem('energy_wh', 2500)).toBe('2.5 kWh');
    expect(formatSystem('gpu_memory_peak_mib', 10240)).toBe('10 GiB');
    expect(formatSystem('gpu_memory_peak_mib', 512)).toBe('512 MiB');
    expect(formatSystem('energy_wh', null)).toBe('—'); // not measured is not zero
  });

  it('sorts runs and trials by a system column, the unmeasured last', () => {
    const runs = [
      run('low', { gpu_util: 6 }),
      run('none', null),
      run('high', { gpu_util: 90 })
    ];
    const sorted = runRows(runs, {
      pinned: [],
      collapsed: [],
      search: '',
      sort: { column: 'system:gpu_util', descending: true },
      frozen: null
    });
    expect(sorted.map(r => (r.kind === 'run' ? r.record.id : ''))).toEqual([
      'high',
      'low',
      'none'
    ]);
    const trials = [
      { trial: 1, system: { energy_wh: 30 } },
      { trial: 2, system: null },
      { trial: 3, system: { energy_wh: 10 } }
    ] as unknown as ITrialRow[];
    expect(
      sortTrials(trials, { key: 'system:energy_wh', descending: false }).map(
        t => t.trial
      )
    ).toEqual([3, 1, 2]);
  });

  it('draws one line per GPU that reported a field, and says the sums in one line', () => {
    const read = parseSystem({
      summary: {
        samples: 3,
        gpu_util: 50,
        gpu_util_p95: 95,
        gpu_hours: 0.5,
        energy_wh: 120,
        gpu_memory_peak_mib: 2048
      },
      series: {
        time: [1, 2, 3],
        gpus: [
          {
            index: 0,
            util: [0, 50, 95],
            memory_mib: [1, 2, 3],
            power_w: [100, 200, 300]
          },
          {
            index: 1,
            util: [5, null, 6],
            memory_mib: [1, 1, 1],
            power_w: [null, null, null]
          }
        ],
        cpu_percent: [null, null, null],
        rss_mib: [null, null, null]
      }
    });
    expect(gpuChart(read, 'util')).toEqual({
      data: [
        [1, 2, 3],
        [0, 50, 95],
        [5, null, 6]
      ],
      labels: ['GPU 0', 'GPU 1']
    });
    expect(gpuChart(read, 'power_w').labels).toEqual(['GPU 0']);
    expect(summaryLine(read.summary)).toBe(
      'GPU 50% mean (p95 95%) · 0.5 GPU-h · 120 Wh · peak GPU memory 2 GiB'
    );
    expect(() => parseSystem({ summary: {} })).toThrow('system');
  });

  it('says My usage in one line, without a utilisation nothing measured', () => {
    const trans = {
      __: (text: string, ...args: unknown[]) =>
        args.reduce<string>(
          (t, a, i) => t.replace(`%${i + 1}`, String(a)),
          text
        ),
      _n: (one: string, many: string, n: number) =>
        (n === 1 ? one : many).replace('%1', String(n))
    } as unknown as Parameters<typeof usageLine>[1];
    const week = parseUsage({
      since: '2026-11-19T00:00:00+00:00',
      runs: 14,
      gpu_hours: 3.25,
      energy_wh: 812,
      gpu_util: 61.4
    });
    expect(usageLine(week, trans)).toBe(
      '3.25 GPU-h · 812 Wh · GPU 61% mean · 14 runs'
    );
    expect(
      usageLine(
        { ...week, runs: 1, gpu_hours: 0, energy_wh: 0, gpu_util: null },
        trans
      )
    ).toBe('0 GPU-h · 0 Wh · 1 run');
    expect(() => parseUsage({ runs: '3' })).toThrow('usage');
  });
});

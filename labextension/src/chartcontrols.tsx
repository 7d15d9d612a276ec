/**
 * The controls every chart view shares (experiment, sweep, compare): smoothing, log
 * scale and the x axis. The settings are plain data, so a view keeps them in its state.
 */
import { TranslationBundle } from '@jupyterlab/translation';
import React from 'react';

import { XAxis } from './compare';

export interface IChartSettings {
  axis: XAxis;
  /** TensorBoard's smoothing weight, 0 (none) to 0.99. */
  smoothing: number;
  log: boolean;
}

export const DEFAULT_CHART_SETTINGS: IChartSettings = {
  axis: 'step',
  smoothing: 0,
  log: false
};

/** The x axis's label as the charts show it. */
export function axisLabel(axis: XAxis, trans: TranslationBundle): string {
  return axis === 'step'
    ? trans.__('step')
    : axis === 'relative'
      ? trans.__('seconds since the first report')
      : trans.__('time');
}

export function ChartControls(props: {
  settings: IChartSettings;
  trans: TranslationBundle;
  onChange(settings: IChartSettings): void;
}): JSX.Element {
  const { settings, trans } = props;
  const set = (change: Partial<IChartSettings>) =>
    props.onChange({ ...settings, ...change });
  return (
    <div className="jp-kubelab-ChartControls">
      <label>
        {trans.__('Smoothing')}
        <input
          type="range"
          name="smoothing"
          min={0}
          max={0.99}
          step={0.01}
          value={settings.smoothing}
          onChange={e => set({ smoothing: Number(e.target.value) })}
        />
        <output>{settings.smoothing.toFixed(2)}</output>
      </label>
      <label>
        <input
          type="checkbox"
          name="log"
          checked={settings.log}
          onChange={e => set({ log: e.target.checked })}
        />
        {trans.__('Log scale')}
      </label>
      <label>
        {trans.__('X axis')}
        <select
          name="axis"
          className="jp-mod-styled"
          value={settings.axis}
          onChange={e => set({ axis: e.target.value as XAxis })}
        >
          <option value="step">{trans.__('Step')}</option>
          <option value="relative">{trans.__('Relative time')}</option>
          <option value="wall">{trans.__('Wall time')}</option>
        </select>
      </label>
    </div>
  );
}

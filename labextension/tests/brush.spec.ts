import {
  brushedTrials,
  brushRange,
  insideBrushes,
  qualityColour
} from '../src/brush';
import { IParallelLine } from '../src/charts';

const line = (trial: number, positions: (number | null)[]): IParallelLine => ({
  trial,
  objective: trial,
  positions,
  quality: null
});

describe('brushing parallel coordinates', () => {
  const lines = [
    line(0, [0.1, 0.9]),
    line(1, [0.5, 0.5]),
    line(2, [0.9, null])
  ];

  it('orders and clamps a dragged range', () => {
    expect(brushRange(0.8, 0.2)).toEqual([0.2, 0.8]);
    expect(brushRange(-0.5, 1.5)).toEqual([0, 1]);
  });

  it('keeps the lines inside every brush; a missing value is outside', () => {
    const one = new Map([[0, [0.4, 1] as const]]);
    expect([...brushedTrials(lines, one)!]).toEqual([1, 2]);
    const two = new Map([
      [0, [0.4, 1] as const],
      [1, [0, 0.6] as const]
    ]);
    expect([...brushedTrials(lines, two)!]).toEqual([1]);
    expect(insideBrushes(lines[2], new Map([[1, [0, 1] as const]]))).toBe(
      false
    );
  });

  it('passes everything (null) when nothing is brushed', () => {
    expect(brushedTrials(lines, new Map())).toBeNull();
  });

  it('colours by quality from violet (worst) to yellow (best), grey without one', () => {
    expect(qualityColour(0)).toBe('rgb(72, 40, 120)');
    expect(qualityColour(1)).toBe('rgb(253, 231, 37)');
    expect(qualityColour(2)).toBe(qualityColour(1));
    expect(qualityColour(null)).toBe('rgb(150, 150, 150)');
  });
});

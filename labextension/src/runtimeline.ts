/**
 * A run's timeline as the experiment view draws it: the spans the server folds from the
 * run's history (`GET experiments/<id>` → `timeline`, kubelab/run_timeline.py), each a
 * state with its reason, its length, whether it resumed after a preemption and, for an
 * elastic run, its size. The strip above the list shows the sizes over time.
 */
import { TERMINAL_STATES } from './model';

/** One span of the run's states. */
export interface ITimelineSpan {
  state: string;
  reason: string;
  start: string;
  /** null: the run is still in this state, or it is the end. */
  seconds: number | null;
  resumed: boolean;
  /** An elastic run's replicas during the span; null for a fixed-size run. */
  replicas: number | null;
}

/** The record's `timeline`, keeping only well-formed spans. */
export function parseTimeline(raw: unknown): ITimelineSpan[] {
  if (!Array.isArray(raw)) {
    return [];
  }
  const spans: ITimelineSpan[] = [];
  for (const item of raw) {
    if (typeof item !== 'object' || item === null) {
      continue;
    }
    const span = item as Record<string, unknown>;
    if (typeof span.state !== 'string' || typeof span.start !== 'string') {
      continue;
    }
    spans.push({
      state: span.state,
      reason: typeof span.reason === 'string' ? span.reason : '',
      start: span.start,
      seconds: typeof span.seconds === 'number' ? span.seconds : null,
      resumed: span.resumed === true,
      replicas: typeof span.replicas === 'number' ? span.replicas : null
    });
  }
  return spans;
}

/** `Running (resumed)`, `Running ×2`: the state as the list names it. */
export function spanLabel(span: ITimelineSpan): string {
  const label = span.resumed ? `${span.state} (resumed)` : span.state;
  return span.replicas === null ? label : `${label} ×${span.replicas}`;
}

/** One piece of the strip: its share of the run's time and height (size over the largest). */
export interface IStripPiece {
  state: string;
  label: string;
  reason: string;
  /** Share of the drawn time, 0..1. */
  width: number;
  /** Share of the strip's height, 0..1: the size over the largest size (1 when unsized). */
  height: number;
}

/**
 * The strip of an elastic or preempted run (none for a run that only ran): every span but
 * the end, as wide as its time (an open span lasts until `nowSeconds`, epoch seconds).
 */
export function timelineStrip(
  spans: ITimelineSpan[],
  nowSeconds: number
): IStripPiece[] {
  const news = spans.some(
    span => span.replicas !== null || span.state === 'Preempted'
  );
  if (!news) {
    return [];
  }
  const timed = spans
    .map(span => {
      let seconds = span.seconds;
      if (seconds === null) {
        const started = Date.parse(span.start) / 1000;
        const ended = (TERMINAL_STATES as ReadonlySet<string>).has(span.state);
        const open = !ended && !isNaN(started);
        seconds = open ? nowSeconds - started : 0;
      }
      return { span, seconds: Math.max(0, seconds) };
    })
    .filter(({ seconds }) => seconds > 0);
  const total = timed.reduce((sum, { seconds }) => sum + seconds, 0);
  const largest = Math.max(1, ...spans.map(span => span.replicas ?? 1));
  return timed.map(({ span, seconds }) => ({
    state: span.state,
    label: spanLabel(span),
    reason: span.reason,
    width: total > 0 ? seconds / total : 0,
    height:
      span.state === 'Running' ? (span.replicas ?? largest) / largest : 0.15
  }));
}

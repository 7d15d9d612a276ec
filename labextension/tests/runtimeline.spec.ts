import {
  ITimelineSpan,
  parseTimeline,
  spanLabel,
  timelineStrip
} from '../src/runtimeline';

const at = (second: number) =>
  `2026-11-26T10:00:${String(second).padStart(2, '0')}.000Z`;
const EPOCH = Date.parse(at(0)) / 1000;

// As GET experiments/<id> → timeline carries an elastic run that shrank and grew back.
const ELASTIC: unknown[] = [
  {
    state: 'Running',
    reason: 'running 2 processes on GPU 0,1',
    start: at(0),
    seconds: 10,
    resumed: false,
    replicas: 2
  },
  {
    state: 'Running',
    reason: 'shrunk to 1 of 2 replicas for urgent (abc) (priority high)',
    start: at(10),
    seconds: 5,
    resumed: false,
    replicas: 1
  },
  {
    state: 'Running',
    reason: 'grew to 2 of 2 replicas: GPU 1 came free',
    start: at(15),
    seconds: null,
    resumed: false,
    replicas: 2
  }
];

describe('parseTimeline', () => {
  it('keeps well-formed spans and defaults the optional fields', () => {
    const spans = parseTimeline([
      ...ELASTIC,
      { state: 'Succeeded', start: at(20) },
      { reason: 'no state' },
      'junk',
      null
    ]);
    expect(spans).toHaveLength(4);
    expect(spans[3]).toEqual({
      state: 'Succeeded',
      reason: '',
      start: at(20),
      seconds: null,
      resumed: false,
      replicas: null
    });
    expect(parseTimeline(undefined)).toEqual([]);
    expect(parseTimeline({ state: 'Running' })).toEqual([]);
  });
});

describe('spanLabel', () => {
  it('names a resume and an elastic size', () => {
    const [first] = parseTimeline(ELASTIC);
    expect(spanLabel(first)).toBe('Running ×2');
    const resumed: ITimelineSpan = { ...first, resumed: true, replicas: null };
    expect(spanLabel(resumed)).toBe('Running (resumed)');
  });
});

describe('timelineStrip', () => {
  it('draws sizes over time, the open span until now', () => {
    const pieces = timelineStrip(parseTimeline(ELASTIC), EPOCH + 20);
    expect(pieces.map(p => [p.label, p.width, p.height])).toEqual([
      ['Running ×2', 0.5, 1],
      ['Running ×1', 0.25, 0.5],
      ['Running ×2', 0.25, 1]
    ]);
    expect(pieces[1].reason).toMatch(/^shrunk to 1 of 2 replicas for urgent/);
  });

  it('shows a preemption low, and leaves out the end', () => {
    const spans = parseTimeline([
      { state: 'Running', reason: 'r', start: at(0), seconds: 6 },
      {
        state: 'Preempted',
        reason: 'preempted for x',
        start: at(6),
        seconds: 2
      },
      {
        state: 'Running',
        reason: 'r',
        start: at(8),
        seconds: 2,
        resumed: true
      },
      { state: 'Succeeded', reason: 'exited 0', start: at(10), seconds: null }
    ]);
    const pieces = timelineStrip(spans, EPOCH + 99);
    expect(pieces.map(p => [p.label, p.width, p.height])).toEqual([
      ['Running', 0.6, 1],
      ['Preempted', 0.2, 0.15],
      ['Running (resumed)', 0.2, 1]
    ]);
  });

  it('draws nothing for a run that only ran', () => {
    const spans = parseTimeline([
      { state: 'Running', reason: 'r', start: at(0), seconds: 3 },
      { state: 'Succeeded', reason: 'exited 0', start: at(3), seconds: null }
    ]);
    expect(timelineStrip(spans, EPOCH + 9)).toEqual([]);
  });
});

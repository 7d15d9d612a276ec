/**
 * The PQL filter box's logic. The server evaluates PQL; the box only sends the text and
 * turns a refusal (`422`, `fields[0].path == "query"`, reason `position N: …`) into a
 * message and a caret under the offending character.
 */
import { KubelabApiError } from './api';

export interface IQueryError {
  message: string;
  /** 0-based index of the offending character in the query, or null if unknown. */
  index: number | null;
}

/** The query problem in a server error, or null when the error is about something else. */
export function queryError(error: unknown): IQueryError | null {
  if (!(error instanceof KubelabApiError) || error.status !== 422) {
    return null;
  }
  const field = error.fields.find(f => f.path === 'query');
  if (!field) {
    return null;
  }
  const match = /^position (\d+): ([\s\S]*)$/.exec(field.reason);
  if (!match) {
    return { message: field.reason, index: null };
  }
  return {
    message: `position ${match[1]}: ${match[2]}`,
    index: Number(match[1]) - 1
  };
}

/** Split the query around the offending character so the view can underline it. */
export function markError(
  query: string,
  index: number | null
): { before: string; at: string; after: string } {
  if (index === null || index < 0) {
    return { before: query, at: '', after: '' };
  }
  if (index >= query.length) {
    return { before: query, at: ' ', after: '' }; // the problem is at the end: "expected …"
  }
  return {
    before: query.slice(0, index),
    at: query[index],
    after: query.slice(index + 1)
  };
}

/** The text the server gets: trimmed, so stray spaces don't trigger a refetch. */
export function normalizeQuery(text: string): string {
  return text.trim();
}

/**
 * A debouncer for typing: `schedule(value)` calls `apply` once typing pauses for
 * `delayMs`; `flush()` applies a pending value at once (Enter); `cancel()` drops it.
 */
export class Debouncer<T> {
  private timer: ReturnType<typeof setTimeout> | null = null;
  private pending: { value: T } | null = null;

  constructor(
    private readonly apply: (value: T) => void,
    private readonly delayMs: number
  ) {}

  schedule(value: T): void {
    this.pending = { value };
    if (this.timer !== null) {
      clearTimeout(this.timer);
    }
    this.timer = setTimeout(() => this.flush(), this.delayMs);
  }

  flush(): void {
    if (this.timer !== null) {
      clearTimeout(this.timer);
      this.timer = null;
    }
    const pending = this.pending;
    this.pending = null;
    if (pending) {
      this.apply(pending.value);
    }
  }

  cancel(): void {
    if (this.timer !== null) {
      clearTimeout(this.timer);
    }
    this.timer = null;
    this.pending = null;
  }
}

/**
 * A Server-Sent Events client built on `fetch`, so requests carry JupyterLab's token
 * header (an `EventSource` cannot set headers), with reconnection and backoff.
 *
 * It knows nothing about JupyterLab: the caller passes `open`, which performs the
 * request. That keeps this module testable against a real HTTP server in jest.
 */

/** One dispatched event: the `event:` name (default `message`), `data:` lines joined. */
export interface IServerSentEvent {
  event: string;
  data: string;
  id: string | null;
}

/**
 * Incremental parser for the `text/event-stream` format (WHATWG HTML, "server-sent
 * events"). Feed it decoded text in any chunking; it returns the complete events.
 */
export class EventStreamParser {
  private buffer = '';
  private dataLines: string[] = [];
  private eventName = '';
  private lastId: string | null = null;
  private retryMs: number | null = null;
  private sawCarriageReturn = false;

  /** The reconnection delay the server last asked for with a `retry:` field. */
  get retry(): number | null {
    return this.retryMs;
  }

  push(chunk: string): IServerSentEvent[] {
    let text = chunk;
    // A CRLF may be split across chunks: the CR ended the line already.
    if (this.sawCarriageReturn && text.startsWith('\n')) {
      text = text.slice(1);
    }
    this.sawCarriageReturn = false;
    this.buffer += text;
    const events: IServerSentEvent[] = [];
    let start = 0;
    for (let i = 0; i < this.buffer.length; i++) {
      const char = this.buffer[i];
      if (char !== '\n' && char !== '\r') {
        continue;
      }
      const line = this.buffer.slice(start, i);
      if (char === '\r') {
        if (i + 1 === this.buffer.length) {
          this.sawCarriageReturn = true;
        } else if (this.buffer[i + 1] === '\n') {
          i++;
        }
      }
      start = i + 1;
      const event = this.processLine(line);
      if (event) {
        events.push(event);
      }
    }
    this.buffer = this.buffer.slice(start);
    return events;
  }

  private processLine(line: string): IServerSentEvent | null {
    if (line === '') {
      return this.dispatch();
    }
    if (line.startsWith(':')) {
      return null; // a comment, e.g. the server's `: ping` heartbeat
    }
    const colon = line.indexOf(':');
    const field = colon < 0 ? line : line.slice(0, colon);
    let value = colon < 0 ? '' : line.slice(colon + 1);
    if (value.startsWith(' ')) {
      value = value.slice(1);
    }
    if (field === 'event') {
      this.eventName = value;
    } else if (field === 'data') {
      this.dataLines.push(value);
    } else if (field === 'id' && !value.includes('\0')) {
      this.lastId = value;
    } else if (field === 'retry' && /^\d+$/.test(value)) {
      this.retryMs = Number(value);
    }
    return null;
  }

  private dispatch(): IServerSentEvent | null {
    const hasData = this.dataLines.length > 0;
    const event = {
      event: this.eventName || 'message',
      data: this.dataLines.join('\n'),
      id: this.lastId
    };
    this.dataLines = [];
    this.eventName = '';
    return hasData ? event : null;
  }
}

/** Delay before reconnection attempt `attempt` (0-based): doubling, capped. */
export function backoffDelay(
  attempt: number,
  initialMs: number,
  maxMs: number
): number {
  return Math.min(maxMs, initialMs * 2 ** Math.max(0, attempt));
}

/** Where the stream is, for the sidebar's header. */
export type StreamState =
  | { kind: 'connecting' }
  | { kind: 'live' }
  | { kind: 'waiting'; retryInMs: number; error: string }
  | { kind: 'stopped' };

export interface IEventStreamOptions {
  /** Perform the request; must pass `signal` on so `stop()` can abort it. */
  open(signal: AbortSignal): Promise<Response>;
  /**
   * Called once per successful (re)connection, before any event is delivered: the
   * place to refetch the list. Events that arrive meanwhile are held and delivered
   * afterwards, in order. A rejection counts as a failed connection. `signal` aborts
   * when this connection ends, so a late list is not applied over a newer one.
   */
  onConnect(signal: AbortSignal): Promise<void>;
  onEvent(event: IServerSentEvent): void;
  onStateChange?(state: StreamState): void;
  /** First reconnection delay; doubles per failure up to `maxDelayMs`. */
  initialDelayMs?: number;
  maxDelayMs?: number;
  /** Reconnect if nothing (not even a heartbeat) arrives for this long. */
  idleTimeoutMs?: number;
}

/** Keeps one event-stream connection open until `stop()`, reconnecting with backoff. */
export class EventStream {
  private readonly options: Required<
    Omit<IEventStreamOptions, 'onStateChange'>
  > &
    Pick<IEventStreamOptions, 'onStateChange'>;
  private controller: AbortController | null = null;
  private running = false;
  private wake: (() => void) | null = null;
  private loop: Promise<void> | null = null;

  constructor(options: IEventStreamOptions) {
    this.options = {
      initialDelayMs: 1000,
      maxDelayMs: 30000,
      idleTimeoutMs: 60000,
      ...options
    };
  }

  get isRunning(): boolean {
    return this.running;
  }

  start(): void {
    if (this.running) {
      return;
    }
    this.running = true;
    this.loop = this.run();
  }

  /** Close the connection and stop reconnecting; resolves once the loop has ended. */
  async stop(): Promise<void> {
    this.running = false;
    this.controller?.abort();
    this.wake?.();
    await this.loop;
    this.loop = null;
  }

  private setState(state: StreamState): void {
    this.options.onStateChange?.(state);
  }

  private async run(): Promise<void> {
    let failures = 0;
    let serverRetry: number | null = null;
    while (this.running) {
      this.setState({ kind: 'connecting' });
      const parser = new EventStreamParser();
      let error: string;
      try {
        const delivered = await this.connectOnce(parser);
        if (delivered) {
          failures = 0;
        }
        error = 'the server closed the event stream';
      } catch (reason) {
        error = reason instanceof Error ? reason.message : String(reason);
      }
      serverRetry = parser.retry ?? serverRetry;
      if (!this.running) {
        break;
      }
      const delay =
        serverRetry ??
        backoffDelay(
          failures,
          this.options.initialDelayMs,
          this.options.maxDelayMs
        );
      failures++;
      this.setState({ kind: 'waiting', retryInMs: delay, error });
      await this.sleep(delay);
    }
    this.setState({ kind: 'stopped' });
  }

  /** One connection; resolves true if it got as far as delivering the list. */
  private async connectOnce(parser: EventStreamParser): Promise<boolean> {
    const controller = new AbortController();
    this.controller = controller;
    let idleTimer: ReturnType<typeof setTimeout> | undefined;
    let idle = false;
    const armIdleTimer = () => {
      clearTimeout(idleTimer);
      idleTimer = setTimeout(() => {
        idle = true;
        controller.abort();
      }, this.options.idleTimeoutMs);
    };
    try {
      armIdleTimer();
      const response = await this.options.open(controller.signal);
      if (!response.ok) {
        void response.body?.cancel().catch(() => undefined);
        throw new Error(`event stream request failed: HTTP ${response.status}`);
      }
      const type = response.headers.get('Content-Type') ?? '';
      if (!type.startsWith('text/event-stream')) {
        void response.body?.cancel().catch(() => undefined);
        throw new Error(
          `event stream has content type "${type}", not text/event-stream`
        );
      }
      if (!response.body) {
        throw new Error('event stream response has no body');
      }
      const reader = response.body.getReader();
      const decoder = new TextDecoder();
      let held: IServerSentEvent[] | null = [];
      let connectError: unknown = null;
      const connected = this.options.onConnect(controller.signal).then(
        () => {
          const pending = held ?? [];
          held = null;
          if (this.running && !controller.signal.aborted) {
            this.setState({ kind: 'live' });
            pending.forEach(event => this.options.onEvent(event));
          }
        },
        reason => {
          connectError = reason;
          controller.abort();
        }
      );
      try {
        for (;;) {
          const { done, value } = await reader.read();
          if (done) {
            break;
          }
          armIdleTimer();
          for (const event of parser.push(
            decoder.decode(value, { stream: true })
          )) {
            if (held) {
              held.push(event);
            } else if (this.running) {
              this.options.onEvent(event);
            }
          }
        }
      } catch (reason) {
        if (!connectError) {
          throw reason;
        }
      } finally {
        // After stop() or an idle abort nobody waits for the list; its handler sees
        // the aborted signal and drops anything late.
        if (this.running && !idle) {
          await connected;
        }
      }
      if (connectError) {
        throw connectError;
      }
      return held === null;
    } catch (reason) {
      if (idle) {
        throw new Error(
          `no data from the event stream for ${this.options.idleTimeoutMs} ms`
        );
      }
      throw reason;
    } finally {
      clearTimeout(idleTimer);
      this.controller = null;
    }
  }

  private sleep(ms: number): Promise<void> {
    return new Promise(resolve => {
      const timer = setTimeout(() => this.wake?.(), ms);
      this.wake = () => {
        this.wake = null;
        clearTimeout(timer);
        resolve();
      };
    });
  }
}

/**
 * The GPU culler's warning, shown as a JupyterLab notification with "Keep running".
 *
 * The culler (a hub service) leaves its notice on this server (`kubelab/api/idle-notice`);
 * `IdleNoticeWatcher` polls for it and shows it once per notice, and the button answers
 * through `idle-notice/keep`, which the culler reads before it stops anything. Polling (once a
 * minute) is enough: the warning comes minutes before the stop.
 */
import { RequestFunction } from './api';

export const POLL_MS = 60_000;

/** The culler's notice as the server holds it. */
export interface IIdleNotice {
  message: string;
  deadline: number;
  posted: number;
  kept: number | null;
}

/** What shows a notice: JupyterLab's notifications, or a test's recorder. */
export interface INoticeDisplay {
  show(notice: IIdleNotice, keep: () => Promise<void>): void;
}

export function parseNotice(data: unknown): IIdleNotice | null {
  const notice = (data as { notice?: unknown } | null)?.notice;
  if (!notice || typeof notice !== 'object') {
    return null;
  }
  const { message, deadline, posted, kept } = notice as Record<string, unknown>;
  if (typeof message !== 'string' || typeof deadline !== 'number') {
    return null;
  }
  return {
    message,
    deadline,
    posted: typeof posted === 'number' ? posted : deadline,
    kept: typeof kept === 'number' ? kept : null
  };
}

/** Polls `idle-notice` and shows each new, unanswered notice once. */
export class IdleNoticeWatcher {
  private shown: number | null = null;

  constructor(
    private readonly baseUrl: string,
    private readonly request: RequestFunction,
    private readonly display: INoticeDisplay
  ) {}

  /** One poll: the notice now held (null if none or unreachable). */
  async check(): Promise<IIdleNotice | null> {
    let notice: IIdleNotice | null = null;
    try {
      const reply = await this.request(this.url('idle-notice'), {
        method: 'GET'
      });
      notice = reply.ok ? parseNotice(await reply.json()) : null;
    } catch {
      return null; // the server restarting: the next poll will tell
    }
    if (notice && notice.kept === null && notice.posted !== this.shown) {
      this.shown = notice.posted;
      this.display.show(notice, () => this.keep());
    }
    return notice;
  }

  async keep(): Promise<void> {
    const reply = await this.request(this.url('idle-notice/keep'), {
      method: 'POST'
    });
    if (!reply.ok && reply.status !== 409) {
      throw new Error(`keep running: the server answered ${reply.status}`);
    }
  }

  private url(path: string): string {
    return this.baseUrl + path;
  }
}

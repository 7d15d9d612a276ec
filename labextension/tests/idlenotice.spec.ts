import { IdleNoticeWatcher, IIdleNotice, parseNotice } from '../src/idlenotice';

/** A server holding one notice, answering as the server extension does. */
class NoticeServer {
  notice: IIdleNotice | null = null;
  requests: string[] = [];

  fetch = async (url: string, init: RequestInit): Promise<Response> => {
    const method = init.method ?? 'GET';
    this.requests.push(`${method} ${url}`);
    if (url.endsWith('idle-notice/keep') && method === 'POST') {
      if (!this.notice) {
        return new Response('{}', { status: 409 });
      }
      this.notice = { ...this.notice, kept: this.notice.kept ?? 1000 };
      return new Response(JSON.stringify({ notice: this.notice }));
    }
    return new Response(JSON.stringify({ notice: this.notice }));
  };
}

const warning = (posted: number): IIdleNotice => ({
  message: 'This server will be stopped at 10:30 UTC',
  deadline: posted + 300,
  posted,
  kept: null
});

describe('IdleNoticeWatcher', () => {
  it('shows a notice once, and answers Keep running through the server', async () => {
    const server = new NoticeServer();
    const shown: IIdleNotice[] = [];
    let keep: () => Promise<void> = async () => undefined;
    const watcher = new IdleNoticeWatcher('/kubelab/api/', server.fetch, {
      show: (notice, answer) => {
        shown.push(notice);
        keep = answer;
      }
    });
    expect(await watcher.check()).toBeNull();
    server.notice = warning(100);
    await watcher.check();
    await watcher.check();
    expect(shown.map(n => n.posted)).toEqual([100]);

    await keep();
    expect(server.requests).toContain('POST /kubelab/api/idle-notice/keep');
    expect((await watcher.check())?.kept).toBe(1000);
    expect(shown).toHaveLength(1);

    server.notice = warning(200); // the next warning, after the clock ran out again
    await watcher.check();
    expect(shown.map(n => n.posted)).toEqual([100, 200]);
  });

  it('stays quiet when the server cannot be reached', async () => {
    const shown: IIdleNotice[] = [];
    const watcher = new IdleNoticeWatcher(
      '/kubelab/api/',
      async () => {
        throw new TypeError('Failed to fetch');
      },
      { show: notice => shown.push(notice) }
    );
    expect(await watcher.check()).toBeNull();
    expect(shown).toHaveLength(0);
  });

  it('reads only well-formed notices', () => {
    expect(parseNotice({ notice: null })).toBeNull();
    expect(parseNotice({ notice: { message: 3, deadline: 1 } })).toBeNull();
    expect(parseNotice({ notice: { message: 'm', deadline: 5 } })).toEqual({
      message: 'm',
      deadline: 5,
      posted: 5,
      kept: null
    });
  });
});

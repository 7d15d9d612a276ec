/**
 * A run's log in the experiment view: streamed while the run lives, one tab per replica and
 * a `build` tab when the run built an environment or ran init steps (the active one marked with `aria-selected` and a style), search with every match
 * highlighted and next/previous (Enter, Shift+Enter), a wrap toggle, a timestamps toggle
 * (the log read again with `timestamps=1`, the times shown as a muted column), and a
 * download of the whole log as shown, times included when they are (the page keeps only
 * its tail).
 */
import { TranslationBundle } from '@jupyterlab/translation';
import React, { useEffect, useMemo, useRef, useState } from 'react';

import { KubelabApi, LogReplica } from './api';
import { ILogFile, logFile } from './logdownload';
import { findMatches, segments, stepMatch } from './logsearch';
import { timePieces } from './logtimes';

const LOG_LIMIT = 1_000_000; // characters of log kept in the page (the tail)

export function LogView(props: {
  api: KubelabApi;
  id: string;
  name: string;
  replicas: number;
  /** The run had init steps or built its environment: its log is a tab too. */
  build: boolean;
  follow: boolean;
  trans: TranslationBundle;
}): JSX.Element {
  const { api, id, replicas, build, follow, trans } = props;
  const [replica, setReplica] = useState<LogReplica>(0);
  const tabs: LogReplica[] = [
    ...(build ? (['build'] as const) : []),
    ...Array.from({ length: replicas }, (_, index) => index)
  ];
  const [text, setText] = useState('');
  const [error, setError] = useState('');
  const [query, setQuery] = useState('');
  const [active, setActive] = useState(-1);
  const [wrap, setWrap] = useState(true);
  const [timestamps, setTimestamps] = useState(false);
  const pre = useRef<HTMLPreElement>(null);
  useEffect(() => {
    const controller = new AbortController();
    setText('');
    setError('');
    let buffer = '';
    let frame = 0;
    const flush = () => {
      frame = 0;
      setText(buffer);
      const node = pre.current;
      if (node && node.scrollHeight - node.scrollTop - node.clientHeight < 40) {
        requestAnimationFrame(() => (node.scrollTop = node.scrollHeight));
      }
    };
    api
      .logs(
        id,
        replica,
        follow,
        chunk => {
          buffer = (buffer + chunk).slice(-LOG_LIMIT);
          if (!frame) {
            frame = requestAnimationFrame(flush);
          }
        },
        controller.signal,
        timestamps
      )
      .then(flush, reason => {
        if (!controller.signal.aborted) {
          setError(String(reason?.message ?? reason));
        }
      });
    return () => {
      controller.abort();
      cancelAnimationFrame(frame);
    };
  }, [id, replica, follow, timestamps]);

  const matches = useMemo(() => findMatches(text, query), [text, query]);
  const current = active < matches.length ? active : matches.length - 1;
  useEffect(() => {
    pre.current
      ?.querySelector('mark.jp-mod-active')
      ?.scrollIntoView({ block: 'nearest' });
  }, [current, query]);
  const step = (direction: 1 | -1) =>
    setActive(stepMatch(current, matches.length, direction));
  const download = async () => {
    let file: ILogFile;
    try {
      file = await logFile(api, props, replica, timestamps);
    } catch (reason) {
      setError(String((reason as Error)?.message ?? reason));
      return;
    }
    const link = document.createElement('a');
    link.href = URL.createObjectURL(
      new Blob([file.text], { type: 'text/plain;charset=utf-8' })
    );
    link.download = file.filename;
    link.click();
    URL.revokeObjectURL(link.href);
  };

  return (
    <div className="jp-kubelab-Logs">
      <div className="jp-kubelab-Logs-toolbar">
        {tabs.length > 1 ? (
          <div className="jp-kubelab-Logs-replicas" role="tablist">
            {tabs.map(tab => (
              <button
                key={tab}
                role="tab"
                aria-selected={tab === replica}
                className={`jp-Button jp-mod-minimal jp-kubelab-Logs-tab${tab === replica ? ' jp-mod-active' : ''}`}
                onClick={() => setReplica(tab)}
              >
                {tab === 'build'
                  ? trans.__('build')
                  : trans.__('replica %1', tab)}
              </button>
            ))}
          </div>
        ) : null}
        <input
          type="search"
          className="jp-mod-styled jp-kubelab-Logs-search"
          placeholder={trans.__('Search the log')}
          aria-label={trans.__('Search the log')}
          value={query}
          onChange={e => {
            setQuery(e.target.value);
            setActive(0);
          }}
          onKeyDown={e => {
            if (e.key === 'Enter') {
              e.preventDefault();
              step(e.shiftKey ? -1 : 1);
            }
          }}
        />
        <span className="jp-kubelab-Logs-count" aria-live="polite">
          {query
            ? matches.length
              ? trans.__('%1 of %2', current + 1, matches.length)
              : trans.__('no match')
            : ''}
        </span>
        <button
          className="jp-Button jp-mod-minimal"
          aria-label={trans.__('Previous match')}
          title={trans.__('Previous match (Shift+Enter)')}
          disabled={!matches.length}
          onClick={() => step(-1)}
        >
          ↑
        </button>
        <button
          className="jp-Button jp-mod-minimal"
          aria-label={trans.__('Next match')}
          title={trans.__('Next match (Enter)')}
          disabled={!matches.length}
          onClick={() => step(1)}
        >
          ↓
        </button>
        <label className="jp-kubelab-Logs-wrap">
          <input
            type="checkbox"
            checked={wrap}
            onChange={e => setWrap(e.target.checked)}
          />
          {trans.__('Wrap lines')}
        </label>
        <label className="jp-kubelab-Logs-wrap jp-kubelab-Logs-timestamps">
          <input
            type="checkbox"
            checked={timestamps}
            onChange={e => setTimestamps(e.target.checked)}
          />
          {trans.__('Timestamps')}
        </label>
        <button
          className="jp-Button jp-mod-styled jp-kubelab-Logs-download"
          onClick={() => void download()}
        >
          {trans.__('Download')}
        </button>
      </div>
      {error ? <p className="jp-kubelab-Error">{error}</p> : null}
      <pre
        className={`jp-kubelab-Logs-text${wrap ? ' jp-mod-wrap' : ''}`}
        ref={pre}
        data-replica={replica}
        tabIndex={0}
      >
        {text
          ? segments(text, matches).map((piece, i, all) =>
              piece.match === null ? (
                timestamps ? (
                  <React.Fragment key={i}>
                    {timePieces(
                      piece.text,
                      i === 0 || all[i - 1].text.endsWith('\n')
                    ).map((part, j) =>
                      part.time ? (
                        <span key={j} className="jp-kubelab-Logs-time">
                          {part.text}
                        </span>
                      ) : (
                        part.text
                      )
                    )}
                  </React.Fragment>
                ) : (
                  piece.text
                )
              ) : (
                <mark
                  key={i}
                  className={piece.match === current ? 'jp-mod-active' : ''}
                >
                  {piece.text}
                </mark>
              )
            )
          : trans.__('(no output yet)')}
      </pre>
    </div>
  );
}

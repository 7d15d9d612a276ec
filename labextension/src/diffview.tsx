/**
 * The Diff view: two runs side by side as `kubelab diff A B` compares them (`GET diff?a=&b=`,
 * kubelab/run_diff.py): the parameters and final metrics that differ, the environment (Python,
 * packages added, removed and changed, GPU, image, git commit) and the code, file by file (a
 * notebook through nbdime's text). The server computes it; this view only lays it out.
 */
import { TranslationBundle } from '@jupyterlab/translation';
import { ReactWidget } from '@jupyterlab/ui-components';
import React, { useEffect, useState } from 'react';

import { IGit, IRunDiff } from './rundiff';
import { createApi } from './connection';

function show(value: unknown): string {
  if (value === null || value === undefined) {
    return '—';
  }
  if (typeof value === 'number') {
    return String(Number(value.toPrecision(6))); // 0.1 * 3 reads 0.3
  }
  return typeof value === 'string' ? value : JSON.stringify(value);
}

function commit(git: IGit | null): string {
  if (!git?.commit) {
    return '—';
  }
  return git.commit.slice(0, 12) + (git.dirty ? ' + changes' : '');
}

function Table(props: {
  head: string[];
  rows: string[][];
  kind: string;
}): JSX.Element {
  return (
    <table className="jp-kubelab-Diff-table" data-diff={props.kind}>
      <thead>
        <tr>
          {props.head.map(h => (
            <th key={h}>{h}</th>
          ))}
        </tr>
      </thead>
      <tbody>
        {props.rows.map(row => (
          <tr key={row[0]} data-name={row[0]}>
            {row.map((cell, i) => (
              <td key={i}>{cell}</td>
            ))}
          </tr>
        ))}
      </tbody>
    </table>
  );
}

/** A unified diff's text, each line marked as added, removed or context. */
function Patch(props: { text: string }): JSX.Element {
  return (
    <pre className="jp-kubelab-Diff-patch">
      {props.text.split('\n').map((line, i) => {
        const kind =
          line.startsWith('+') && !line.startsWith('+++')
            ? 'added'
            : line.startsWith('-') && !line.startsWith('---')
              ? 'removed'
              : 'context';
        return (
          <span key={i} data-line={kind}>
            {line + '\n'}
          </span>
        );
      })}
    </pre>
  );
}

export function DiffBody(props: {
  diff: IRunDiff;
  trans: TranslationBundle;
}): JSX.Element {
  const { diff, trans } = props;
  const env = diff.environment;
  const packages = [
    ...Object.entries(env.packages.added).map(([n, v]) => [n, '—', v]),
    ...Object.entries(env.packages.removed).map(([n, v]) => [n, v, '—']),
    ...Object.entries(env.packages.changed).map(([n, [a, b]]) => [n, a, b])
  ].sort((x, y) => x[0].localeCompare(y[0]));
  const same = trans.__('the same');
  const recorded = Object.values(env.recorded).some(Boolean);
  return (
    <>
      <section>
        <h2>{trans.__('Parameters')}</h2>
        {diff.params.length ? (
          <Table
            kind="params"
            head={[trans.__('Name'), 'A', 'B']}
            rows={diff.params.map(p => [p.name, show(p.a), show(p.b)])}
          />
        ) : (
          <p>{same}</p>
        )}
      </section>
      <section>
        <h2>{trans.__('Metrics (last values)')}</h2>
        {diff.metrics.length ? (
          <Table
            kind="metrics"
            head={[trans.__('Metric'), 'A', 'B', 'B − A']}
            rows={diff.metrics.map(m => [
              m.name,
              show(m.a),
              show(m.b),
              show(m.delta)
            ])}
          />
        ) : (
          <p>{same}</p>
        )}
      </section>
      <section>
        <h2>{trans.__('Environment')}</h2>
        {recorded ? (
          <>
            <Table
              kind="environment"
              head={['', 'A', 'B']}
              rows={[
                ['Python', show(env.python.a), show(env.python.b)],
                ['git', commit(env.git.a), commit(env.git.b)],
                ...(env.gpu ? [['GPU', show(env.gpu.a), show(env.gpu.b)]] : []),
                ...(env.image
                  ? [['image', show(env.image.a), show(env.image.b)]]
                  : [])
              ]}
            />
            <h3>{trans.__('Packages')}</h3>
            {packages.length ? (
              <Table
                kind="packages"
                head={[trans.__('Package'), 'A', 'B']}
                rows={packages}
              />
            ) : (
              <p>{same}</p>
            )}
          </>
        ) : (
          <p>{trans.__('Not recorded for either run.')}</p>
        )}
      </section>
      <section>
        <h2>{trans.__('Code')}</h2>
        {diff.code.length ? (
          diff.code.map(entry => (
            <details
              key={entry.path}
              open
              className="jp-kubelab-Diff-file"
              data-path={entry.path}
              data-change={entry.change}
            >
              <summary>
                <code>{entry.path}</code> {entry.change}
                {entry.notebook ? ` (${trans.__('notebook, by nbdime')})` : ''}
              </summary>
              {entry.text ? <Patch text={entry.text} /> : null}
            </details>
          ))
        ) : (
          <p>{same}</p>
        )}
      </section>
    </>
  );
}

function DiffView(props: {
  a: string;
  b: string;
  trans: TranslationBundle;
}): JSX.Element {
  const { a, b, trans } = props;
  const [diff, setDiff] = useState<IRunDiff | null>(null);
  const [error, setError] = useState('');
  useEffect(() => {
    createApi()
      .diff(a, b)
      .then(setDiff, reason =>
        setError(reason instanceof Error ? reason.message : String(reason))
      );
  }, [a, b]);
  return (
    <div className="jp-kubelab-Detail jp-kubelab-Diff">
      <header className="jp-kubelab-Detail-header">
        <h1>{trans.__('Diff')}</h1>
        {diff
          ? (['a', 'b'] as const).map(side => (
              <span key={side} className="jp-kubelab-Diff-side">
                <b>{side.toUpperCase()}</b> {diff[side].name}{' '}
                <code>{diff[side].id}</code> ({diff[side].status})
              </span>
            ))
          : null}
      </header>
      {error ? (
        <p className="jp-kubelab-Error" role="alert">
          {error}
        </p>
      ) : diff ? (
        <DiffBody diff={diff} trans={trans} />
      ) : (
        <p>{trans.__('Loading…')}</p>
      )}
    </div>
  );
}

/** The main-area content comparing run `a` with run `b`. */
export function diffViewContent(options: {
  a: string;
  b: string;
  trans: TranslationBundle;
}): ReactWidget {
  const widget = ReactWidget.create(
    <DiffView a={options.a} b={options.b} trans={options.trans} />
  );
  widget.addClass('jp-kubelab-DiffHost');
  return widget;
}

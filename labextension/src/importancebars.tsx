/**
 * Parameter importance as the server computes it (`importance` in `GET sweeps/<id>`, the
 * same scores as `kubelab sweep show`): one bar per parameter, the most important first,
 * each as wide as its share of the largest score.
 */
import { TranslationBundle } from '@jupyterlab/translation';
import React from 'react';

export function ImportanceBars(props: {
  importance: Record<string, number> | null;
  trans: TranslationBundle;
}): JSX.Element | null {
  const scores = Object.entries(props.importance ?? {})
    .filter(([, score]) => Number.isFinite(score))
    .sort((a, b) => b[1] - a[1] || a[0].localeCompare(b[0]));
  if (!scores.length) {
    return null;
  }
  const top = Math.max(...scores.map(([, score]) => score)) || 1;
  return (
    <section className="jp-kubelab-Detail-section jp-kubelab-Importance">
      <h2>{props.trans.__('Parameter importance')}</h2>
      <table>
        <tbody>
          {scores.map(([name, score]) => (
            <tr key={name} data-param={name}>
              <th scope="row">{name}</th>
              <td className="jp-kubelab-Importance-bar">
                <span style={{ width: `${(100 * score) / top}%` }} />
              </td>
              <td>{score.toFixed(3)}</td>
            </tr>
          ))}
        </tbody>
      </table>
    </section>
  );
}

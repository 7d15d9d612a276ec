/**
 * What the sidebars' lists of live things share (the TensorBoards section, the Pipelines
 * sidebar's schedules): the sentence saying how to make the first one while there is none,
 * a row's small text buttons (Open, Stop, Pause, Delete), and how a refused action is told.
 */
import { showErrorMessage } from '@jupyterlab/apputils';
import React from 'react';

import { describeError } from './api';

/** The items, one `<li>` each from `children`, or `empty` while there is none. */
export function ItemList<T>(props: {
  items: readonly T[];
  empty: string;
  emptyClassName: string;
  className: string;
  children(item: T): JSX.Element;
}): JSX.Element {
  if (props.items.length === 0) {
    return <p className={props.emptyClassName}>{props.empty}</p>;
  }
  return <ul className={props.className}>{props.items.map(props.children)}</ul>;
}

/** A row's action, a minimal text button; `className` names it for styles and tests. */
export function RowAction(props: {
  className: string;
  label: string;
  onClick(): unknown;
}): JSX.Element {
  return (
    <button
      className={`jp-Button jp-mod-minimal ${props.className}`}
      onClick={() => void props.onClick()}
    >
      {props.label}
    </button>
  );
}

/** The handler for a refused action: an error dialog titled `title`, with the server's reason. */
export function reportFailure(
  title: string
): (reason: unknown) => Promise<void> {
  return async reason => {
    await showErrorMessage(title, describeError(reason));
  };
}

/**
 * A dialog body holding a React form (the run and sweep dialogs): `getValue()` gives what
 * was typed, and the dialog focuses its first field once React has put the form in the page.
 */
import { Dialog, showDialog } from '@jupyterlab/apputils';
import { ReactWidget } from '@jupyterlab/ui-components';
import { Message } from '@lumino/messaging';
import React, { useLayoutEffect, useRef } from 'react';

import type { IFormAnswer } from './submitform';

/** What a form view gets: the starting value, and where to report changes. */
export interface IFormViewProps<T> {
  initial: T;
  onChange(value: T): void;
}

export class FormBody<T> extends ReactWidget implements Dialog.IBodyWidget<T> {
  constructor(
    private value: T,
    private readonly view: (props: IFormViewProps<T>) => JSX.Element,
    className: string
  ) {
    super();
    this.addClass(className);
  }

  getValue(): T {
    return this.value;
  }

  /**
   * The dialog focuses its first field once `renderPromise` resolves. ReactWidget resolves
   * it at the browser's next idle moment, which on a busy page comes after the user has
   * clicked into another field, and the focus jumped back to the name. Resolve it when
   * React has put the form in the page instead.
   */
  protected onUpdateRequest(msg: Message): void {
    const committed = new Promise<void>(resolve => (this.committed = resolve));
    super.onUpdateRequest(msg);
    this.renderPromise = committed;
  }

  protected render(): JSX.Element {
    return (
      <Committed onCommit={() => this.committed()}>
        {this.view({
          initial: this.value,
          onChange: value => (this.value = value)
        })}
      </Committed>
    );
  }

  private committed: () => void = () => undefined;
}

function Committed(props: {
  onCommit(): void;
  children: JSX.Element;
}): JSX.Element {
  useLayoutEffect(() => props.onCommit());
  return props.children;
}

/**
 * JupyterLab's `Dialog` keeps its accept button disabled while any element carries
 * `.jp-mod-error`, and re-checks on `input` events. Tell it whenever the set of shown
 * errors changes (a fixed field's error went), whatever order the listeners ran in.
 */
export function useErrorsSignal(
  errorKeys: string
): React.RefObject<HTMLDivElement> {
  const body = useRef<HTMLDivElement>(null);
  useLayoutEffect(() => {
    body.current?.dispatchEvent(new Event('input', { bubbles: true }));
  }, [errorKeys]);
  return body;
}

/**
 * Show a form in a dialog with Cancel and `accept`, its name field focused; resolves to
 * the button pressed and what was typed.
 */
export async function showForm<T>(options: {
  title: string;
  value: T;
  view: (props: IFormViewProps<T>) => JSX.Element;
  className: string;
  cancel: string;
  accept: string;
}): Promise<IFormAnswer<T>> {
  const body = new FormBody<T>(options.value, options.view, options.className);
  const result = await showDialog({
    title: options.title,
    body,
    buttons: [
      Dialog.cancelButton({ label: options.cancel }),
      Dialog.okButton({ label: options.accept })
    ],
    focusNodeSelector: 'input[name="name"]'
  });
  return { accept: result.button.accept, value: body.getValue() };
}

/**
 * The Try-it panel of a model service: a v2 inference request to edit (prefilled from the
 * model's metadata where its server declares inputs), sent through the Jupyter server's
 * proxy with the user's login, and the answer as the model server gave it (a 4xx included)
 * with its status and the latency the browser measured.
 */
import { MainAreaWidget } from '@jupyterlab/apputils';
import { TranslationBundle } from '@jupyterlab/translation';
import { LabIcon, ReactWidget } from '@jupyterlab/ui-components';
import React, { useEffect, useState } from 'react';

import { KubelabApi } from './api';
import { inferenceBody, IServiceRecord, metadataPath } from './services';

interface IAnswer {
  status?: number;
  statusText?: string;
  ms?: number;
  text: string;
  ok: boolean;
}

const JSON_HEADERS = {
  'Content-Type': 'application/json',
  Accept: 'application/json'
};

/** JSON shown indented; anything else as it came. */
function pretty(text: string): string {
  try {
    return JSON.stringify(JSON.parse(text), null, 2);
  } catch {
    return text;
  }
}

export function TryIt(props: {
  service: IServiceRecord;
  api: KubelabApi;
  trans: TranslationBundle;
}): JSX.Element {
  const { service, api, trans } = props;
  const [body, setBody] = useState('');
  const [declared, setDeclared] = useState<boolean | null>(null);
  const [answer, setAnswer] = useState<IAnswer | null>(null);
  const [busy, setBusy] = useState(false);

  useEffect(() => {
    let live = true;
    api
      .toService(service, metadataPath(service), {
        method: 'GET',
        headers: { Accept: 'application/json' }
      })
      .then(response => (response.ok ? response.json() : null))
      .catch(() => null)
      .then(metadata => {
        if (!live) {
          return;
        }
        const inputs = (metadata as { inputs?: unknown } | null)?.inputs;
        setDeclared(Array.isArray(inputs) && inputs.length > 0);
        setBody(
          previous =>
            previous || JSON.stringify(inferenceBody(metadata), null, 2)
        );
      });
    return () => {
      live = false;
    };
  }, [service.id]);

  const send = async () => {
    try {
      JSON.parse(body);
    } catch (error) {
      setAnswer({
        ok: false,
        text: trans.__('body: not JSON (%1)', (error as Error).message)
      });
      return;
    }
    setBusy(true);
    const started = performance.now();
    try {
      const response = await api.toService(service, service.endpoint, {
        method: 'POST',
        headers: JSON_HEADERS,
        body
      });
      const text = await response.text();
      setAnswer({
        ok: response.ok,
        status: response.status,
        statusText: response.statusText,
        ms: performance.now() - started,
        text: pretty(text)
      });
    } catch (error) {
      setAnswer({ ok: false, text: String(error) });
    } finally {
      setBusy(false);
    }
  };

  return (
    <div className="jp-kubelab-TryIt" data-service-id={service.id}>
      <div className="jp-kubelab-TryIt-endpoint">
        <code>{`POST /${service.url.replace(/^\//, '') + service.endpoint}`}</code>
      </div>
      <label className="jp-kubelab-TryIt-label">
        {declared === false
          ? trans.__(
              'Request body (the model server declares no inputs: give your tensor’s shape and data)'
            )
          : trans.__('Request body (Open Inference Protocol v2)')}
        <textarea
          className="jp-kubelab-TryIt-body jp-mod-styled"
          spellCheck={false}
          rows={14}
          value={body}
          onChange={event => setBody(event.target.value)}
          onKeyDown={event => {
            if (event.key === 'Enter' && (event.ctrlKey || event.metaKey)) {
              event.preventDefault();
              void send();
            }
          }}
        />
      </label>
      <div className="jp-kubelab-TryIt-controls">
        <button
          className="jp-Button jp-mod-styled jp-mod-accept jp-kubelab-TryIt-send"
          disabled={busy || !body}
          onClick={() => void send()}
        >
          {busy ? trans.__('Sending…') : trans.__('Send')}
        </button>
        {answer?.status !== undefined ? (
          <span className="jp-kubelab-TryIt-status" data-status={answer.status}>
            {trans.__(
              '%1 %2 · %3 ms',
              answer.status,
              answer.statusText ?? '',
              (answer.ms ?? 0).toFixed(1)
            )}
          </span>
        ) : null}
      </div>
      {answer ? (
        <pre
          className={`jp-kubelab-TryIt-answer${answer.ok ? '' : ' jp-mod-error'}`}
        >
          {answer.text}
        </pre>
      ) : null}
    </div>
  );
}

export function tryItView(options: {
  service: IServiceRecord;
  api: KubelabApi;
  trans: TranslationBundle;
  icon: LabIcon;
}): MainAreaWidget {
  const { service, trans } = options;
  const content = ReactWidget.create(<TryIt {...options} />);
  content.addClass('jp-kubelab-TryItView');
  const view = new MainAreaWidget({ content });
  view.id = `kubelab-service-try-${service.id}`;
  view.title.label = trans.__('Try %1', service.id);
  view.title.caption = trans.__('Send requests to service %1', service.id);
  view.title.icon = options.icon;
  view.title.closable = true;
  return view;
}

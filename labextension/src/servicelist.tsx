/**
 * The sidebar's Services section: each service version with what it serves, its state,
 * replicas ready, traffic share (on a cluster; a button that opens the split and the mirror
 * when the service has several versions) and the share of requests copied to it when it is
 * mirrored to, URL, its last minute's requests through the
 * proxy (rate and median latency), and its actions: Try it (a model's
 * v2 request panel), Stop while it runs, Delete once it has ended. Rows follow the shared
 * `LiveStore` (`service` events); the actions are commands, so the palette has them too.
 */
import { ServerConnection } from '@jupyterlab/services';
import { TranslationBundle } from '@jupyterlab/translation';
import { CommandRegistry } from '@lumino/commands';
import React from 'react';

import {
  describeTraffic,
  formatLineage,
  formatMirror,
  formatReplicas,
  formatTraffic,
  IServiceRecord,
  SERVICE_ENDED,
  serviceVersions
} from './services';

export const ServiceCommandIDs = {
  tryService: 'kubelab:try-service',
  stopService: 'kubelab:stop-service',
  deleteService: 'kubelab:delete-service',
  serviceTraffic: 'kubelab:service-traffic',
  serveSweep: 'kubelab:serve-sweep-best'
} as const;

export function ServiceList(props: {
  services: readonly IServiceRecord[];
  commands: CommandRegistry;
  trans: TranslationBundle;
}): JSX.Element {
  const { services, commands, trans } = props;
  const { baseUrl } = ServerConnection.makeSettings();
  if (services.length === 0) {
    return (
      <p className="jp-kubelab-Sidebar-empty">
        {trans.__(
          'No services. Serve a run’s model with %1, or %2 in a notebook.',
          'kubelab serve RUN --model outputs/model.joblib',
          '%serve'
        )}
      </p>
    );
  }
  const button = (
    service: IServiceRecord,
    command: string,
    label: string,
    className: string
  ) => (
    <button
      className={`jp-Button jp-mod-minimal ${className}`}
      onClick={() => void commands.execute(command, { id: service.id })}
    >
      {label}
    </button>
  );
  return (
    <ul className="jp-kubelab-List">
      {services.map(service => {
        const ended = SERVICE_ENDED.has(service.state);
        const local = service.url.startsWith('/');
        const serves = formatLineage(service.lineage);
        const mirror = formatMirror(service);
        return (
          <li
            key={service.id}
            className="jp-kubelab-Service"
            data-service-id={service.id}
            data-state={service.state}
          >
            <div className="jp-kubelab-Service-line">
              <span className="jp-kubelab-Service-name">{service.name}</span>
              <span className="jp-kubelab-Service-version">
                {trans.__('v%1', service.version)}
              </span>
              <span
                className={`jp-kubelab-StatusDot jp-kubelab-StatusDot-${service.state.toLowerCase()}`}
              />
              <span className="jp-kubelab-Service-state" title={service.reason}>
                {service.state}
              </span>
              <span
                className="jp-kubelab-Service-replicas jp-kubelab-Number"
                title={trans.__('replicas ready')}
              >
                {formatReplicas(service)}
              </span>
              {service.traffic === undefined ? null : serviceVersions(
                  services,
                  service.name
                ).length > 1 ? (
                <button
                  className="jp-Button jp-mod-minimal jp-kubelab-Service-traffic jp-kubelab-Number"
                  title={trans.__(
                    'share of the traffic; click to split it between the versions or mirror it to one',
                    service.mirror ?? 0
                  )}
                  onClick={() =>
                    void commands.execute(ServiceCommandIDs.serviceTraffic, {
                      name: service.name
                    })
                  }
                >
                  {service.traffic}%
                </button>
              ) : (
                <span
                  className="jp-kubelab-Service-traffic jp-kubelab-Number"
                  title={trans.__('share of the traffic')}
                >
                  {service.traffic}%
                </span>
              )}
              {mirror ? (
                <span
                  className="jp-kubelab-Service-mirror jp-kubelab-Number"
                  title={trans.__(
                    'gets a copy of %1% of the service’s requests; its answers are dropped',
                    service.mirror ?? 0
                  )}
                >
                  {mirror}
                </span>
              ) : null}
            </div>
            {serves ? (
              <div className="jp-kubelab-Service-serves" title={serves}>
                {serves}
              </div>
            ) : null}
            {ended ? null : (
              <div
                className="jp-kubelab-Service-stats jp-kubelab-Number"
                title={describeTraffic(service.stats)}
              >
                {formatTraffic(service.stats)}
              </div>
            )}
            {ended && service.reason ? (
              <div className="jp-kubelab-Service-reason">{service.reason}</div>
            ) : null}
            <div className="jp-kubelab-Service-actions">
              {local ? (
                <a
                  className="jp-kubelab-Service-url"
                  href={baseUrl + service.url.replace(/^\//, '')}
                  target="_blank"
                  rel="noreferrer"
                >
                  {service.url}
                </a>
              ) : (
                <code className="jp-kubelab-Service-url">{service.url}</code>
              )}
              {service.kind === 'model' && !ended
                ? button(
                    service,
                    ServiceCommandIDs.tryService,
                    trans.__('Try it'),
                    'jp-kubelab-Service-try'
                  )
                : null}
              {ended
                ? button(
                    service,
                    ServiceCommandIDs.deleteService,
                    trans.__('Delete'),
                    'jp-kubelab-Service-delete'
                  )
                : button(
                    service,
                    ServiceCommandIDs.stopService,
                    trans.__('Stop'),
                    'jp-kubelab-Service-stop'
                  )}
            </div>
          </li>
        );
      })}
    </ul>
  );
}

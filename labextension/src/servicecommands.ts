/**
 * The services' commands (the sidebar's and the sweep view's buttons call them; the palette
 * lists them): serve a sweep's best trial, open a model's Try-it panel, split a cluster
 * service's traffic between its versions and mirror it to one, stop a service, delete an ended one. The store is told of an action's answer at once; the server's
 * `service` events follow.
 */
import { Dialog, MainAreaWidget, showDialog } from '@jupyterlab/apputils';
import { TranslationBundle } from '@jupyterlab/translation';
import { LabIcon } from '@jupyterlab/ui-components';
import { CommandRegistry } from '@lumino/commands';
import { Widget } from '@lumino/widgets';

import { KubelabApi } from './api';
import { ServiceCommandIDs } from './servicelist';
import {
  currentMirror,
  IServiceRecord,
  mirrorShares,
  serviceName,
  serviceVersions,
  trafficShares
} from './services';
import { LiveStore } from './store';
import { tryItView } from './tryit';

/** Appends `control` to `parent` inside a label reading `label`, and returns it. */
function labelled<T extends HTMLElement>(
  parent: HTMLElement,
  label: string,
  control: T
): T {
  const wrapper = document.createElement('label');
  wrapper.textContent = label;
  wrapper.appendChild(control);
  parent.appendChild(wrapper);
  return control;
}

/**
 * A labelled input appended to `parent`, named and filled; a `numeric` one asks touch
 * keyboards for digits.
 */
function inputField(
  parent: HTMLElement,
  label: string,
  name: string,
  value: string,
  numeric = false
): HTMLInputElement {
  const input = document.createElement('input');
  input.className = 'jp-mod-styled';
  input.name = name;
  if (numeric) {
    input.inputMode = 'numeric';
  }
  input.value = value;
  return labelled(parent, label, input);
}

interface IServeForm {
  name: string;
  path: string;
}

/** The serve dialog's fields: the service's name and the model file in the trial's folder. */
class ServeForm extends Widget implements Dialog.IBodyWidget<IServeForm> {
  constructor(name: string, trans: TranslationBundle) {
    super();
    this.addClass('jp-kubelab-ServeForm');
    this.name = inputField(this.node, trans.__('Service name'), 'name', name);
    this.path = inputField(
      this.node,
      trans.__('Model file, in the trial’s folder'),
      'path',
      'outputs/model.joblib'
    );
  }

  getValue(): IServeForm {
    return { name: this.name.value.trim(), path: this.path.value.trim() };
  }

  private readonly name: HTMLInputElement;
  private readonly path: HTMLInputElement;
}

/** What the traffic dialog holds: each version's percent as typed, and the mirror's choice. */
interface ITrafficForm {
  traffic: Record<string, string>;
  /** The version requests are copied to ('' for none) and the share copied, as typed. */
  mirrorTo: string;
  mirrorPercent: string;
}

/**
 * One percent field per version, filled with its share now (an empty one takes the rest),
 * and the mirror: a version that gets a copy of a share of the requests (its answers are
 * dropped), filled with the mirror now; `none` copies nothing.
 */
class TrafficForm extends Widget implements Dialog.IBodyWidget<ITrafficForm> {
  constructor(versions: readonly IServiceRecord[], trans: TranslationBundle) {
    super();
    this.addClass('jp-kubelab-TrafficForm');
    for (const version of versions) {
      const input = inputField(
        this.node,
        trans.__('version %1, percent', version.version),
        `v${version.version}`,
        String(version.traffic ?? 0),
        true
      );
      this.inputs.set(version.version, input);
    }
    const mirror = currentMirror(versions);
    this.mirrorTo = document.createElement('select');
    this.mirrorTo.className = 'jp-mod-styled';
    this.mirrorTo.name = 'mirror-to';
    this.mirrorTo.add(new Option(trans.__('none'), ''));
    for (const version of versions) {
      this.mirrorTo.add(
        new Option(trans.__('version %1', version.version), version.version)
      );
    }
    this.mirrorTo.value = mirror?.version ?? '';
    labelled(
      this.node,
      trans.__('Mirror to (a copy; its answers are dropped)'),
      this.mirrorTo
    );
    this.mirrorPercent = inputField(
      this.node,
      trans.__('Mirror, percent of requests copied'),
      'mirror-percent',
      String(mirror?.percent ?? 100),
      true
    );
  }

  getValue(): ITrafficForm {
    const traffic: Record<string, string> = {};
    this.inputs.forEach((input, version) => (traffic[version] = input.value));
    return {
      traffic,
      mirrorTo: this.mirrorTo.value,
      mirrorPercent: this.mirrorPercent.value
    };
  }

  private readonly inputs = new Map<string, HTMLInputElement>();
  private readonly mirrorTo: HTMLSelectElement;
  private readonly mirrorPercent: HTMLInputElement;
}

const SERVICE_ARGS = {
  args: {
    type: 'object',
    properties: {
      id: { type: 'string', description: 'service id, e.g. iris-v1' }
    },
    required: ['id']
  }
};

export function addServiceCommands(options: {
  commands: CommandRegistry;
  store: LiveStore;
  api: KubelabApi;
  trans: TranslationBundle;
  icon: LabIcon;
  /** Show the view under `key` (made by `make` the first time), as the other views are. */
  show(key: string, make: () => MainAreaWidget, args: { id: string }): void;
  fail(title: string): (reason: unknown) => Promise<unknown>;
}): void {
  const { commands, store, api, trans, fail } = options;
  commands.addCommand(ServiceCommandIDs.serveSweep, {
    describedBy: {
      args: {
        type: 'object',
        properties: {
          id: { type: 'string', description: 'sweep id' },
          name: { type: 'string', description: 'the sweep’s name' }
        },
        required: ['id']
      }
    },
    label: trans.__('Serve the best trial…'),
    execute: async args => {
      const id = String(args.id);
      const answer = await showDialog({
        title: trans.__('Serve the best trial of %1', String(args.name ?? id)),
        body: new ServeForm(serviceName(String(args.name ?? '')), trans),
        buttons: [
          Dialog.cancelButton(),
          Dialog.okButton({ label: trans.__('Serve') })
        ]
      });
      if (!answer.button.accept || !answer.value) {
        return;
      }
      const { name, path } = answer.value;
      await api
        .startService({ kind: 'service', name, model: { run: id, path } })
        .then(record => store.noteService(record))
        .catch(fail(trans.__('Cannot serve the best trial')));
    }
  });
  commands.addCommand(ServiceCommandIDs.tryService, {
    describedBy: SERVICE_ARGS,
    label: trans.__('Try service…'),
    execute: async args => {
      const id = String(args.id);
      await store.ready; // a restored tab asks before the list was read
      const service = store.service(id);
      if (!service) {
        await fail(trans.__('Cannot open %1', id))(
          new Error(trans.__('no service %1', id))
        );
        return;
      }
      options.show(
        `service:${id}`,
        () => tryItView({ service, api, trans, icon: options.icon }),
        { id }
      );
    }
  });
  commands.addCommand(ServiceCommandIDs.serviceTraffic, {
    describedBy: {
      args: {
        type: 'object',
        properties: {
          name: { type: 'string', description: 'service name, e.g. iris' }
        },
        required: ['name']
      }
    },
    label: trans.__('Split or mirror service traffic…'),
    execute: async args => {
      const name = String(args.name);
      await store.ready;
      const answer = await showDialog({
        title: trans.__('Traffic of %1', name),
        body: new TrafficForm(serviceVersions(store.services, name), trans),
        buttons: [
          Dialog.cancelButton(),
          Dialog.okButton({ label: trans.__('Apply') })
        ]
      });
      if (!answer.button.accept || !answer.value) {
        return;
      }
      await api
        .setTraffic(
          name,
          trafficShares(answer.value.traffic),
          mirrorShares(answer.value.mirrorTo, answer.value.mirrorPercent)
        )
        .then(records => records.forEach(record => store.noteService(record)))
        .catch(fail(trans.__('Cannot change the traffic of %1', name)));
    }
  });
  commands.addCommand(ServiceCommandIDs.stopService, {
    describedBy: SERVICE_ARGS,
    label: trans.__('Stop service'),
    execute: args =>
      api
        .stopService(String(args.id))
        .then(record => store.noteService(record))
        .catch(fail(trans.__('Cannot stop service %1', String(args.id))))
  });
  commands.addCommand(ServiceCommandIDs.deleteService, {
    describedBy: SERVICE_ARGS,
    label: trans.__('Delete service…'),
    execute: async args => {
      const id = String(args.id);
      const answer = await showDialog({
        title: trans.__('Delete service %1?', id),
        body: trans.__('Its record and logs are removed.'),
        buttons: [
          Dialog.cancelButton(),
          Dialog.warnButton({ label: trans.__('Delete') })
        ]
      });
      if (!answer.button.accept) {
        return;
      }
      await api
        .deleteService(id)
        .then(() => store.noteService({ id, deleted: true }))
        .catch(fail(trans.__('Cannot delete service %1', id)));
    }
  });
}

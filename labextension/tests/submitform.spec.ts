import { KubelabApi } from '../src/api';
import { fieldForPath, IRunForm, defaultForm, NO_DEFAULTS } from '../src/form';
import {
  FormRefused,
  IFormAnswer,
  refusalOf,
  Refusal,
  submitForm
} from '../src/submitform';
import { ITestServer, record, sendJson, startServer } from './server';

/**
 * A user at the dialog: each time it is shown, they read what it shows and answer with
 * the next of `answers` (a function of what the form holds).
 */
function user(answers: ((shown: IRunForm) => IFormAnswer<IRunForm>)[]) {
  const shown: { value: IRunForm; refusal: Refusal<keyof IRunForm> }[] = [];
  const ask = async (value: IRunForm, refusal: Refusal<keyof IRunForm>) => {
    shown.push({ value, refusal });
    const answer = answers.shift();
    if (!answer) {
      throw new Error('the dialog was shown more often than the test expected');
    }
    return answer(value);
  };
  return { ask, shown };
}

describe('submitForm', () => {
  let server: ITestServer;
  let api: KubelabApi;
  const initial = defaultForm('train', NO_DEFAULTS);

  const serve = async (handler: Parameters<typeof startServer>[0]) => {
    server = await startServer(handler);
    api = new KubelabApi(server.url + 'kubelab/api', (url, init) =>
      fetch(url, init)
    );
  };

  afterEach(() => server?.close());

  const send = (form: IRunForm) =>
    api.submit({ name: form.name, resources: { memory: form.memory } });

  it('shows the server refusal beside its field, keeps what was typed, and sends the fix', async () => {
    await serve((request, res, index) =>
      index === 0
        ? sendJson(res, 400, {
            error: 'invalid experiment',
            detail: '',
            fields: [
              {
                path: 'resources.memory',
                reason: "'lots' is not a Kubernetes quantity"
              },
              { path: 'workdir', reason: 'is outside the workspace' }
            ]
          })
        : sendJson(res, 201, record({ name: JSON.parse(request.body).name }))
    );
    const drafts = new Map<string, IRunForm>([['old.py', initial]]);
    const { ask, shown } = user([
      form => ({ accept: true, value: { ...form, memory: 'lots' } }),
      form => ({ accept: true, value: { ...form, memory: '8Gi' } })
    ]);
    const created = await submitForm({
      subject: 'train.py',
      initial,
      drafts,
      ask,
      send,
      fieldFor: fieldForPath
    });
    expect(created?.name).toBe('train');
    expect(shown).toEqual([
      { value: initial, refusal: {} },
      {
        value: { ...initial, memory: 'lots' },
        refusal: {
          memory: ["resources.memory: 'lots' is not a Kubernetes quantity"],
          general: ['workdir: is outside the workspace']
        }
      }
    ]);
    expect(server.requests.map(r => JSON.parse(r.body).resources)).toEqual([
      { memory: 'lots' },
      { memory: '8Gi' }
    ]);
    expect([...drafts.keys()]).toEqual(['old.py']); // another subject's draft stays
  });

  it('keeps a cancelled form as its subject draft, and forgets it once sent', async () => {
    await serve((_request, res) => sendJson(res, 201, record()));
    const drafts = new Map<string, IRunForm>();
    const typed = { ...initial, name: 'typed', cpu: '2' };
    const first = user([() => ({ accept: false, value: typed })]);
    const options = { subject: 'train.py', initial, drafts, send };
    expect(
      await submitForm({ ...options, ask: first.ask, fieldFor: fieldForPath })
    ).toBeNull();
    expect(drafts.get('train.py')).toEqual(typed);
    expect(server.requests).toEqual([]); // a cancel sends nothing

    const again = user([form => ({ accept: true, value: form })]);
    await submitForm({ ...options, ask: again.ask, fieldFor: fieldForPath });
    expect(again.shown[0].value).toEqual(typed);
    expect(drafts.has('train.py')).toBe(false);
    expect(JSON.parse(server.requests[0].body).name).toBe('typed');
  });

  it('shows an error without fields as a general reason, and the form refused by its own check', async () => {
    await serve((_request, res) => {
      res.writeHead(502, 'Bad Gateway', { 'Content-Type': 'text/html' });
      res.end('proxy down');
    });
    const { ask, shown } = user([
      form => ({ accept: true, value: form }),
      form => ({ accept: true, value: { ...form, params: 'lr=' } }),
      form => ({ accept: false, value: form })
    ]);
    const result = await submitForm({
      subject: 'train.py',
      initial,
      drafts: new Map(),
      ask,
      send: async form => {
        if (form.params) {
          throw new FormRefused([{ path: 'params.lr', reason: 'no value' }]);
        }
        return send(form);
      },
      fieldFor: fieldForPath
    });
    expect(result).toBeNull();
    expect(shown.map(s => s.refusal)).toEqual([
      {},
      { general: ['Bad Gateway: proxy down'] },
      { params: ['params.lr: no value'] }
    ]);
    expect(server.requests).toHaveLength(1); // the refused form was not sent
  });
});

describe('refusalOf', () => {
  it('names the error when it is not an Error', () => {
    expect(refusalOf('lost connection', fieldForPath)).toEqual({
      general: ['lost connection']
    });
  });
});

import {
  buildSpec,
  commandFor,
  defaultForm,
  formatParamsText,
  fieldForPath,
  formFromSpec,
  NO_DEFAULTS,
  parametersCellSource,
  paramsFromParametersCell,
  parseParams,
  RUN_FORM_FIELDS,
  toDnsName
} from '../src/form';
import { readSettings } from '../src/settings';
import { groupByField, pendingErrors } from '../src/submitform';

describe('commandFor', () => {
  it('runs a script with Python and a notebook through papermill, in its folder', () => {
    expect(commandFor('work/mnist/train.py')).toEqual({
      cwd: 'work/mnist',
      command: ['python', 'train.py'],
      name: 'train'
    });
    expect(commandFor('/Explore.ipynb')).toEqual({
      cwd: '',
      command: ['python', '-m', 'kubelab.papermill_run', 'Explore.ipynb'],
      name: 'Explore'
    });
    expect(commandFor('notes.txt')).toBeNull();
  });

  it('makes names fit for Kubernetes', () => {
    expect(toDnsName('My Notebook (v2)')).toBe('my-notebook-v2');
  });
});

describe('parseParams', () => {
  it('reads name=value lines with typed values', () => {
    expect(
      parseParams(
        'lr=0.01\n# comment\n\nlayers: 3\nact=relu\nflag=true\nsizes=[1, 2]\nq="7"'
      )
    ).toEqual({
      params: {
        lr: 0.01,
        layers: 3,
        act: 'relu',
        flag: true,
        sizes: [1, 2],
        q: '7'
      }
    });
  });

  it('reads a JSON object', () => {
    expect(parseParams('{"a": {"b": 1}}')).toEqual({ params: { a: { b: 1 } } });
  });

  it('names the line of a mistake', () => {
    expect(parseParams('lr=1\n3 = x')).toEqual({
      error: 'line 2: expected name=value, got "3 = x"'
    });
    expect(parseParams('a=1\na=2')).toEqual({
      error: 'line 2: "a" is given twice'
    });
    expect(parseParams('{"a": ')).toMatchObject({
      error: expect.stringMatching(/^not a valid JSON object/)
    });
    expect(parseParams('[1]')).toMatchObject({
      error: expect.stringMatching(/expected name=value/)
    });
  });

  it('round-trips through the text the dialog shows', () => {
    const params = {
      lr: 0.01,
      act: 'relu',
      n: '5',
      list: [1],
      spaced: ' x ',
      t: true
    };
    const parsed = parseParams(formatParamsText(params));
    expect(parsed).toEqual({ params });
  });
});

describe('buildSpec', () => {
  const base = { command: ['python', 'train.py'] };

  it('lays the form over the base, leaving empty fields to the server', () => {
    const form = {
      ...defaultForm('train', NO_DEFAULTS),
      params: 'lr=0.1',
      gpus: '2',
      gpuType: 'T4'
    };
    expect(buildSpec(form, base)).toEqual({
      spec: {
        command: ['python', 'train.py'],
        name: 'train',
        resources: { gpus: 2, gpu_type: 'T4' },
        replicas: 1,
        framework: 'none',
        params: { lr: 0.1 }
      }
    });
  });

  it('passes odd values through as typed so the server names the problem', () => {
    const form = {
      ...defaultForm('x', NO_DEFAULTS),
      memory: 'lots',
      cpu: '500m',
      gpus: 'two',
      replicas: '1.5'
    };
    const built = buildSpec(form, base) as { spec: Record<string, unknown> };
    expect(built.spec.resources).toEqual({
      gpus: 'two',
      cpu: '500m',
      memory: 'lots'
    });
    expect(built.spec.replicas).toBe('1.5');
  });

  it('reports a parameters mistake as a field error', () => {
    const form = { ...defaultForm('x', NO_DEFAULTS), params: 'oops' };
    expect(buildSpec(form, base)).toEqual({
      errors: [
        { path: 'params', reason: 'line 1: expected name=value, got "oops"' }
      ]
    });
  });

  it('re-runs a spec with changes, keeping what the form does not show', () => {
    const spec = {
      name: 'old',
      command: ['python', 't.py'],
      params: { lr: 0.1 },
      resources: {
        gpus: 1,
        gpu_type: 'T4',
        cpu: null,
        memory: '4Gi',
        shm: '1Gi'
      },
      replicas: 2,
      framework: 'pytorch',
      env: { A: '1' },
      workdir: '/home/u/project',
      code: null,
      image: null
    };
    const form = {
      ...formFromSpec(spec),
      name: 'new',
      memory: '',
      params: 'lr=0.2'
    };
    expect(form.params).toBe(
      'lr=0.1'.replace('0.1', '0.2') === form.params ? form.params : form.params
    );
    const built = buildSpec(form, spec) as { spec: Record<string, unknown> };
    expect(built.spec).toMatchObject({
      name: 'new',
      params: { lr: 0.2 },
      resources: { gpus: 1, gpu_type: 'T4', shm: '1Gi' },
      replicas: 2,
      framework: 'pytorch',
      env: { A: '1' },
      workdir: '/home/u/project'
    });
    expect(built.spec.resources).not.toHaveProperty('memory');
    expect(built.spec.resources).not.toHaveProperty('cpu');
    expect(built.spec).not.toHaveProperty('image');
  });

  it('drops a workdir derived from a code snapshot', () => {
    const spec = {
      command: ['python', 'main.py'],
      code: { source: 'print(1)', filename: 'main.py' },
      workdir: '/k/runs/x/code'
    };
    const built = buildSpec(formFromSpec(spec), spec) as {
      spec: Record<string, unknown>;
    };
    expect(built.spec).not.toHaveProperty('workdir');
  });
});

describe('formFromSpec', () => {
  it('shows a spec as the dialog fields', () => {
    const form = formFromSpec({
      name: 'a',
      resources: { gpus: 1, memory: '2Gi' },
      replicas: 1,
      framework: 'none',
      params: { x: 'y' }
    });
    // one value per declared field, in the declaration's order
    expect(Object.keys(form)).toEqual(RUN_FORM_FIELDS.map(field => field.key));
    expect(form).toMatchObject({
      name: 'a',
      gpus: '1',
      gpuType: '',
      cpu: '',
      memory: '2Gi',
      image: '',
      replicas: '1',
      framework: 'none',
      params: 'x=y'
    });
  });
});

describe("the run form's field errors", () => {
  it('puts each server reason next to its input, the rest on top', () => {
    expect(
      groupByField(
        [
          {
            path: 'resources.memory',
            reason: "'lots' is not a Kubernetes quantity"
          },
          { path: 'params.lr', reason: 'must be a number' },
          { path: 'workdir', reason: 'is outside the workspace' },
          { path: 'resources.memory', reason: 'second' }
        ],
        fieldForPath
      )
    ).toEqual({
      memory: [
        "resources.memory: 'lots' is not a Kubernetes quantity",
        'resources.memory: second'
      ],
      params: ['params.lr: must be a number'],
      general: ['workdir: is outside the workspace']
    });
  });
});

describe('readSettings', () => {
  it('uses the schema defaults for missing or wrong values', () => {
    const settings = readSettings(null);
    expect(settings.columns).toEqual([
      'name',
      'status',
      'started',
      'duration',
      'gpus',
      'params',
      'metric'
    ]);
    expect(settings.defaults).toEqual(NO_DEFAULTS);
  });

  it('keeps known columns in order and always the name', () => {
    const settings = readSettings({
      columns: ['metric', 'bogus', 'status'],
      defaultResources: { gpus: 1, gpuType: 'A100', memory: '8Gi', cpu: 4 },
      defaultImage: 'pytorch:2'
    });
    expect(settings.columns).toEqual(['name', 'metric', 'status']);
    expect(settings.defaults).toEqual({
      gpus: 1,
      gpuType: 'A100',
      cpu: '',
      memory: '8Gi',
      image: 'pytorch:2'
    });
    expect(defaultForm('Train', settings.defaults)).toMatchObject({
      name: 'train',
      gpus: '1',
      gpuType: 'A100',
      image: 'pytorch:2'
    });
  });
});

describe('pendingErrors', () => {
  const refused = {
    ...defaultForm('train', NO_DEFAULTS),
    memory: 'lots',
    cpu: 'x'
  };
  const errors = {
    memory: ["resources.memory: 'lots' is not a Kubernetes quantity"],
    cpu: ["resources.cpu: 'x' is not a Kubernetes quantity"],
    general: ['the server is busy']
  };

  it('keeps every reason while the form still holds the refused values', () => {
    expect(pendingErrors(errors, refused, { ...refused })).toEqual(errors);
  });

  it("drops a field's reason once the user changes that field", () => {
    expect(
      pendingErrors(errors, refused, { ...refused, memory: '8Gi' })
    ).toEqual({
      cpu: errors.cpu,
      general: errors.general
    });
    // Typing the refused value back brings the reason back.
    expect(
      pendingErrors(errors, refused, { ...refused, memory: 'lots', cpu: '2' })
    ).toEqual({ memory: errors.memory, general: errors.general });
  });
});

describe('the papermill parameters cell', () => {
  const notebook = {
    cells: [
      { cell_type: 'code', metadata: {}, source: 'import os' },
      {
        cell_type: 'code',
        metadata: { tags: ['parameters'] },
        source: [
          '# defaults\n',
          'lr = 0.01  # learning rate\n',
          "optimizer = 'adam'\n",
          'name = "run #1"\n',
          'use_amp = True\n',
          'seed = None\n',
          'steps = int(os.environ.get("STEPS", 10))\n',
          '    indented = 1\n'
        ]
      }
    ]
  };

  it('finds the tagged cell', () => {
    expect(parametersCellSource(notebook)).toContain('lr = 0.01');
    expect(parametersCellSource({ cells: [] })).toBeNull();
    expect(parametersCellSource('nonsense')).toBeNull();
  });

  it('turns its literal assignments into the dialog parameters', () => {
    const text = paramsFromParametersCell(parametersCellSource(notebook)!);
    expect(text).toBe(
      'lr=0.01\noptimizer="adam"\nname="run #1"\nuse_amp=true\nseed=null'
    );
    expect(parseParams(text)).toEqual({
      params: {
        lr: 0.01,
        optimizer: 'adam',
        name: 'run #1',
        use_amp: true,
        seed: null
      }
    });
  });
});

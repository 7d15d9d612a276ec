/**
 * Jest runs the pure modules of the sidebar (table model, charts, form, query box,
 * sweeps, virtualization, event-stream client, REST client)
 * in Node, against real HTTP servers where a network is involved; the view is covered
 * by the browser test in tests/browser/.
 */
module.exports = {
  testEnvironment: 'node',
  roots: ['<rootDir>/labextension/tests'],
  testMatch: ['**/*.spec.ts'],
  transform: {
    '^.+\\.tsx?$': [
      'ts-jest',
      { tsconfig: '<rootDir>/labextension/tsconfig.test.json' }
    ]
  },
  collectCoverageFrom: [
    'labextension/src/model.ts',
    'labextension/src/events.ts',
    'labextension/src/api.ts',
    'labextension/src/charts.ts',
    'labextension/src/form.ts',
    'labextension/src/logdownload.ts',
    'labextension/src/query.ts',
    'labextension/src/settings.ts',
    'labextension/src/submitform.ts',
    'labextension/src/sweeps.ts',
    'labextension/src/virtual.ts'
  ],
  coverageReporters: ['text-summary'],
  testTimeout: 20000
};

// Lint rules for the JupyterLab extension, following JupyterLab's extension template.
import js from '@eslint/js';
import jupyterPlugin from '@jupyter/eslint-plugin';
import { defineConfig } from 'eslint/config';
import prettierRecommended from 'eslint-plugin-prettier/recommended';
import globals from 'globals';
import tseslint from 'typescript-eslint';

export default defineConfig([
  {
    ignores: [
      '.venv',
      '.yarn',
      'node_modules',
      'coverage',
      'kubelab/labextension',
      'labextension/lib',
      '**/*.d.ts',
      '**/*.js'
    ]
  },
  js.configs.recommended,
  tseslint.configs.recommended,
  { plugins: { jupyter: jupyterPlugin } },
  jupyterPlugin.configs.recommended,
  {
    files: ['labextension/**/*.ts', 'labextension/**/*.tsx'],
    languageOptions: {
      globals: { ...globals.browser, ...globals.node }
    },
    rules: {
      '@typescript-eslint/naming-convention': [
        'error',
        {
          selector: 'interface',
          format: ['PascalCase'],
          custom: { regex: '^I[A-Z]', match: true }
        }
      ],
      '@typescript-eslint/no-unused-vars': ['error', { args: 'none' }],
      '@typescript-eslint/no-explicit-any': 'error',
      '@typescript-eslint/no-namespace': 'off',
      curly: ['error', 'all'],
      eqeqeq: 'error',
      'prefer-arrow-callback': 'error'
    }
  },
  {
    files: ['labextension/tests/**/*.ts'],
    rules: { '@typescript-eslint/no-non-null-assertion': 'off' }
  },
  prettierRecommended
]);

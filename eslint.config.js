// ESLint flat config: typescript-eslint with type information; workflows stay deterministic.
const tseslint = require('typescript-eslint');
const importX = require('eslint-plugin-import-x');
const { createTypeScriptImportResolver } = require('eslint-import-resolver-typescript');

module.exports = tseslint.config(
  {
    ignores: [
      'node_modules/**',
      'dist/**',
      '.tools/**',
      '.data/**',
      'coverage/**',
      'scripts/bootstrap.js',
      'src/hosted/static/**',
    ],
  },
  ...tseslint.configs.recommended,
  {
    files: ['**/*.ts'],
    languageOptions: { parserOptions: { projectService: true, tsconfigRootDir: __dirname } },
    rules: {
      '@typescript-eslint/no-floating-promises': 'error',
      '@typescript-eslint/no-misused-promises': ['error', { checksVoidReturn: false }],
      '@typescript-eslint/no-unused-vars': [
        'error',
        { argsIgnorePattern: '^_', varsIgnorePattern: '^_', ignoreRestSiblings: true },
      ],
      '@typescript-eslint/no-explicit-any': 'off',
      '@typescript-eslint/no-require-imports': 'off',
    },
  },
  // No module imports, at run time, one that imports it back (directly or around a longer circle).
  // Type-only imports are not followed (a workflow and its starter name each other's types).
  {
    files: ['src/**/*.ts', 'workflows/**/*.ts', 'activities/**/*.ts', 'scripts/**/*.ts'],
    plugins: { 'import-x': importX },
    settings: {
      // The plugin reads each imported module itself: with typescript-eslint's parser, as TypeScript.
      'import-x/parsers': { '@typescript-eslint/parser': ['.ts'] },
      'import-x/extensions': ['.ts', '.js'],
      'import-x/resolver-next': [createTypeScriptImportResolver()],
    },
    rules: { 'import-x/no-cycle': 'error' },
  },
  {
    files: ['workflows/**/*.ts'],
    rules: {
      'no-restricted-imports': [
        'error',
        {
          patterns: [
            {
              group: ['node:*', 'fs', 'path', 'http', 'https', 'crypto', 'net', 'dns', 'os', 'child_process'],
              message: 'Workflows are deterministic: do I/O in activities.',
            },
            {
              group: ['pg', 'knex', 'koa', '@koa/*', '**/src/db/**', '**/src/http/**'],
              message: 'Workflows are deterministic: do I/O in activities.',
            },
            {
              group: ['pino', 'pino-*', '@opentelemetry/*', '**/src/lib/log', '**/src/telemetry/**'],
              message: 'The workflow sandbox has no process or streams: log with the logger of @temporalio/workflow.',
            },
            {
              group: ['@temporalio/client', '@temporalio/worker', '@temporalio/activity'],
              message: 'Workflows import only @temporalio/workflow.',
            },
          ],
        },
      ],
      'no-restricted-syntax': [
        'error',
        {
          selector: "ImportDeclaration[source.value=/activities/][importKind!='type']",
          message: 'Import activities as types only (proxyActivities).',
        },
      ],
    },
  },
  {
    files: ['**/*.js'],
    rules: { '@typescript-eslint/no-require-imports': 'off' },
    languageOptions: {
      sourceType: 'commonjs',
      globals: {
        require: 'readonly',
        module: 'writable',
        __dirname: 'readonly',
        process: 'readonly',
        console: 'readonly',
      },
    },
  },
);

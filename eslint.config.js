// ESLint flat config: typescript-eslint with type information; workflows stay deterministic.
const tseslint = require('typescript-eslint');

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

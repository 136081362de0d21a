/** Jest: SWC-transformed TypeScript; one database and one workflow bundle per run (global setup). */
module.exports = {
  testEnvironment: 'node',
  roots: ['<rootDir>/test'],
  testMatch: ['**/*.test.ts'],
  transform: {
    '^.+\\.ts$': ['@swc/jest', { jsc: { target: 'es2022' } }],
    // The OTLP exporters load http/https with import(), which Jest's CommonJS runtime refuses without
    // --experimental-vm-modules (open-telemetry/opentelemetry-js#6035): compile those to require().
    '/node_modules/@opentelemetry/otlp-exporter-base/.+\\.js$': [
      '@swc/jest',
      { jsc: { target: 'es2022' }, module: { type: 'commonjs' } },
    ],
  },
  transformIgnorePatterns: ['/node_modules/(?!@opentelemetry/otlp-exporter-base/)'],
  globalSetup: '<rootDir>/test/global-setup.ts',
  globalTeardown: '<rootDir>/test/global-teardown.ts',
  testTimeout: 60_000,
  maxWorkers: 2,
};

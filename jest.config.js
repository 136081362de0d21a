/** Jest: SWC-transformed TypeScript; one database and one workflow bundle per run (global setup). */
module.exports = {
  testEnvironment: 'node',
  roots: ['<rootDir>/test'],
  testMatch: ['**/*.test.ts'],
  transform: {
    '^.+\\.ts$': ['@swc/jest', { jsc: { target: 'es2022' } }],
    // Packages Jest's CommonJS runtime cannot load as they ship, compiled to CommonJS like our code:
    // github-slugger is ESM-only; the OTLP exporters load http/https with import(), which Jest refuses
    // without --experimental-vm-modules (open-telemetry/opentelemetry-js#6035).
    '/node_modules/(github-slugger|@opentelemetry/otlp-exporter-base)/.+\\.js$': [
      '@swc/jest',
      { jsc: { target: 'es2022' }, module: { type: 'commonjs' } },
    ],
  },
  transformIgnorePatterns: ['/node_modules/(?!(github-slugger|@opentelemetry/otlp-exporter-base)/)'],
  globalSetup: '<rootDir>/test/global-setup.ts',
  globalTeardown: '<rootDir>/test/global-teardown.ts',
  testTimeout: 60_000,
  maxWorkers: 2,
};

import { join } from 'node:path';

/** Where global setup leaves what every test file of this run shares. */
export const runEnvFile = join(__dirname, '..', '..', '.data', 'test-run.json');

export interface RunEnv {
  /** The run's own database. */
  databaseUrl: string;
  /** The admin connection that created it (dropped again in teardown). */
  adminUrl: string;
  databaseName: string;
  /** The workflow bundle, built once per run. */
  workflowBundlePath: string;
  /** The time-skipping test server binary. */
  testServerPath: string;
}

import { join } from 'node:path';

/** The variable through which global setup tells the test files (its child processes) where the run's file is. */
export const RUN_ENV_VARIABLE = 'SVC_TEST_RUN_FILE';

/** A new file for this run's shared facts, so concurrent runs in one checkout never share one. */
export function newRunEnvFile(): string {
  return join(__dirname, '..', '..', '.data', `test-run-${process.pid}-${Date.now()}.json`);
}

/** This run's file, as global setup published it. */
export function runEnvFile(): string {
  const file = process.env[RUN_ENV_VARIABLE];
  if (!file) throw new Error('No test run file: run the tests with `npm test`.');
  return file;
}

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
  /** The `temporal` CLI, for the tests that need a real dev server. */
  temporalCliPath: string;
  /**
   * TEMPORAL_MODE=cluster: the self-hosted cluster that the tests which use a real server run on
   * instead of a dev server each: the checkout's `npm run cluster`, or the run's `own` (stopped
   * and dropped by teardown).
   */
  temporalCluster?: { address: string; dir: string; own: boolean };
}

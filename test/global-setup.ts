import { mkdirSync, writeFileSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { Client } from 'pg';
import { bundleWorkflowCode } from '@temporalio/worker';
import { workflowInterceptorModules } from '../src/telemetry/temporal';
import { createDb, migrateLatest } from '../src/db/knex';
import { randomString } from '../src/lib/ids';
import { newRunEnvFile, RUN_ENV_VARIABLE, RunEnv } from './helpers/run-env';

/**
 * Once per run: a fresh database on DATABASE_URL's server, migrated, and the workflow bundle.
 * `npm test` sets DATABASE_URL (embedded Postgres when none is given) and TEMPORAL_TEST_SERVER_PATH.
 */
export default async function globalSetup(): Promise<void> {
  const adminUrl = process.env.DATABASE_URL;
  const testServerPath = process.env.TEMPORAL_TEST_SERVER_PATH;
  const temporalCliPath = process.env.TEMPORAL_CLI_PATH;
  if (!adminUrl || !testServerPath || !temporalCliPath) {
    throw new Error(
      'Run the tests with `npm test`, which sets DATABASE_URL, TEMPORAL_TEST_SERVER_PATH and TEMPORAL_CLI_PATH.',
    );
  }
  const databaseName = `svc_test_${Date.now()}_${randomString(6).toLowerCase()}`;
  const admin = new Client({ connectionString: adminUrl });
  await admin.connect();
  await admin.query(`CREATE DATABASE ${databaseName}`);
  await admin.end();

  const url = new URL(adminUrl);
  url.pathname = `/${databaseName}`;
  const databaseUrl = url.toString();
  const db = createDb(databaseUrl, 2);
  await migrateLatest(db);
  await db.destroy();

  const { code } = await bundleWorkflowCode({
    workflowsPath: require.resolve('../workflows'),
    workflowInterceptorModules,
    logger: {
      log: () => undefined,
      trace: () => undefined,
      debug: () => undefined,
      info: () => undefined,
      warn: () => undefined,
      error: console.error,
    },
  });
  const runEnvFile = newRunEnvFile();
  mkdirSync(dirname(runEnvFile), { recursive: true });
  const workflowBundlePath = join(dirname(runEnvFile), `workflow-bundle-${databaseName}.js`);
  writeFileSync(workflowBundlePath, code);

  const env: RunEnv = { databaseUrl, adminUrl, databaseName, workflowBundlePath, testServerPath, temporalCliPath };
  writeFileSync(runEnvFile, JSON.stringify(env));
  process.env[RUN_ENV_VARIABLE] = runEnvFile; // inherited by the test workers and read by teardown
}

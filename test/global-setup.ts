import { mkdirSync, writeFileSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { Client } from 'pg';
import { bundleWorkflowCode } from '@temporalio/worker';
import { workflowInterceptorModules } from '../src/telemetry/temporal';
import { createDb, migrateLatest } from '../src/db/knex';
import { runningCluster, startOwnCluster } from '../scripts/cluster/cluster';
import { NAMESPACE_RETENTION } from '../scripts/cluster/settings';
import { repoRoot } from '../scripts/processes';
import { randomString } from '../src/lib/ids';
import { newRunEnvFile, RUN_ENV_VARIABLE, RunEnv } from './helpers/run-env';

/**
 * Once per run: a fresh database on DATABASE_URL's server, migrated, and the workflow bundle.
 * `npm test` sets DATABASE_URL (embedded Postgres when none is given) and TEMPORAL_TEST_SERVER_PATH.
 */
/**
 * TEMPORAL_MODE=cluster: the tests that use a real server run on a self-hosted cluster: the
 * checkout's `npm run cluster` when it runs, else one of this run's own (`.data/cluster-run-<pid>`,
 * databases `<run database>_temporal` and `…_temporal_visibility` on DATABASE_URL's server), which
 * teardown stops and drops. The build is the script's: a cold one takes minutes.
 */
async function useCluster(
  adminUrl: string,
  temporalCli: string,
  databaseName: string,
): Promise<NonNullable<RunEnv['temporalCluster']>> {
  const running = runningCluster(join(repoRoot, '.data', 'cluster'));
  if (running) return { address: running.address, dir: join(repoRoot, '.data', 'cluster'), own: false };
  const { state, dir } = await startOwnCluster({
    dataDir: join(repoRoot, '.data'),
    databaseUrl: adminUrl,
    databasePrefix: `${databaseName}_temporal`,
    namespace: 'default',
    retention: NAMESPACE_RETENTION,
    temporalCli,
    timeoutMs: 300_000,
    say: (line) => process.stderr.write(`${line}\n`),
  });
  return { address: state.address, dir, own: true };
}

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
  if (process.env.TEMPORAL_MODE === 'cluster')
    env.temporalCluster = await useCluster(adminUrl, temporalCliPath, databaseName);
  writeFileSync(runEnvFile, JSON.stringify(env));
  process.env[RUN_ENV_VARIABLE] = runEnvFile; // inherited by the test workers and read by teardown
}

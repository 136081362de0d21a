import { readFileSync, rmSync } from 'node:fs';
import { Client } from 'pg';
import { closeOwnCluster } from '../scripts/cluster/cluster';
import { RunEnv, runEnvFile } from './helpers/run-env';

/** Drops the run's database unless KEEP_TEST_DB is set (to inspect it after a failure). */
export default async function globalTeardown(): Promise<void> {
  const file = runEnvFile();
  const env = JSON.parse(readFileSync(file, 'utf8')) as RunEnv;
  rmSync(env.workflowBundlePath, { force: true });
  rmSync(file, { force: true });
  if (env.temporalCluster?.own) await closeOwnCluster(env.temporalCluster.dir, env.adminUrl);
  if (process.env.KEEP_TEST_DB) return;
  const admin = new Client({ connectionString: env.adminUrl });
  await admin.connect();
  await admin.query(`DROP DATABASE IF EXISTS ${env.databaseName} WITH (FORCE)`);
  await admin.end();
}

import { execFile } from 'node:child_process';
import { promisify } from 'node:util';
import { Client as PgClient } from 'pg';
import type { ClusterDatabase } from './config';
import { sqlToolBinary } from './settings';

const run = promisify(execFile);

/** The schema the SQL tool embeds for each database (`--schema-name`). */
const SCHEMAS = { persistence: 'postgresql/v12/temporal', visibility: 'postgresql/v12/visibility' } as const;

/** The SQL tool's connection flags; the password goes by its environment variable, never on a command line. */
function toolInvocation(db: ClusterDatabase, database: string) {
  const args = [
    '--endpoint',
    db.host,
    '--port',
    String(db.port),
    '--user',
    db.user,
    '--plugin',
    'postgres12',
    '--database',
    database,
  ];
  return { args, env: { ...process.env, SQL_PASSWORD: db.password } };
}

async function sqlTool(db: ClusterDatabase, database: string, command: string[]): Promise<void> {
  const { args, env } = toolInvocation(db, database);
  try {
    await run(sqlToolBinary, [...args, ...command], { env, timeout: 300_000 });
  } catch (err) {
    const { stderr, stdout } = err as { stderr?: string; stdout?: string };
    throw new Error(
      `temporal-sql-tool ${command.join(' ')} on ${database} failed:\n${(stderr || stdout || String(err)).trim()}`,
    );
  }
}

/** Connects to `database` on the server (the maintenance database `postgres` to look databases up). */
async function connect(db: ClusterDatabase, database: string): Promise<PgClient> {
  const client = new PgClient({
    host: db.host,
    port: db.port,
    user: db.user,
    password: db.password,
    database,
    connectionTimeoutMillis: 10_000,
  });
  client.on('error', () => undefined);
  await client.connect();
  return client;
}

async function databaseExists(db: ClusterDatabase, database: string): Promise<boolean> {
  const client = await connect(db, 'postgres');
  try {
    return (await client.query('SELECT 1 FROM pg_database WHERE datname = $1', [database])).rowCount === 1;
  } finally {
    await client.end();
  }
}

async function hasVersionTable(db: ClusterDatabase, database: string): Promise<boolean> {
  const client = await connect(db, database);
  try {
    return (
      (await client.query("SELECT to_regclass('public.schema_version') IS NOT NULL AS present")).rows[0].present ===
      true
    );
  } finally {
    await client.end();
  }
}

/**
 * What an operator does for a new cluster and at each server release, with the server's own SQL
 * tool: create the database when it is missing, set up the versioning tables once (`setup-schema
 * -v 0.0`), then `update-schema` to the schema embedded in this release (a no-op when current).
 * Returns what it did, for the start-up output.
 */
export async function ensureSchema(db: ClusterDatabase, kind: keyof typeof SCHEMAS): Promise<string> {
  const database = kind === 'persistence' ? db.database : db.visibilityDatabase;
  const steps: string[] = [];
  if (!(await databaseExists(db, database))) {
    await sqlTool(db, database, ['create-database']);
    steps.push('created');
  }
  if (!(await hasVersionTable(db, database))) {
    await sqlTool(db, database, ['setup-schema', '-v', '0.0']);
    steps.push('versioning set up');
  }
  await sqlTool(db, database, ['update-schema', '--schema-name', SCHEMAS[kind]]);
  steps.push(`schema ${await schemaVersion(db, database)}`);
  return `${database}: ${steps.join(', ')}`;
}

/** The schema version the SQL tool recorded in `database`. */
async function schemaVersion(db: ClusterDatabase, database: string): Promise<string> {
  const client = await connect(db, database);
  try {
    const { rows } = await client.query('SELECT curr_version FROM schema_version LIMIT 1');
    return String(rows[0]?.curr_version ?? 'unknown');
  } finally {
    await client.end();
  }
}

/** One live member of the cluster's membership ring, as the services record it in Postgres. */
export interface Member {
  role: 'frontend' | 'history' | 'matching' | 'worker' | 'internal-frontend';
  address: string;
}

const ROLES = ['all', 'frontend', 'history', 'matching', 'worker', 'internal-frontend'] as const;

/**
 * The members that heartbeat in the last `withinSeconds` (the services write cluster_membership
 * every few seconds; a killed process's row stays until it expires, so the heartbeat decides).
 */
export async function liveMembers(db: ClusterDatabase, withinSeconds = 30): Promise<Member[]> {
  const client = await connect(db, db.database);
  try {
    const { rows } = await client.query<{ role: number; rpc_address: string; rpc_port: number }>(
      `SELECT role, rpc_address, rpc_port FROM cluster_membership
        WHERE last_heartbeat > (now() AT TIME ZONE 'UTC') - make_interval(secs => $1)
        ORDER BY role, rpc_port`,
      [withinSeconds],
    );
    return rows.map((r) => ({ role: ROLES[r.role] as Member['role'], address: `${r.rpc_address}:${r.rpc_port}` }));
  } finally {
    await client.end();
  }
}

/** Drops the cluster's two databases (a throwaway cluster of a test run or a bench, once stopped). */
export async function dropClusterDatabases(db: ClusterDatabase): Promise<void> {
  const client = await connect(db, 'postgres');
  try {
    for (const name of [db.database, db.visibilityDatabase])
      await client.query(`DROP DATABASE IF EXISTS ${client.escapeIdentifier(name)} WITH (FORCE)`);
  } finally {
    await client.end();
  }
}

/** True once a process of the cluster has written its cluster metadata (its first start on the databases). */
export async function hasClusterMetadata(db: ClusterDatabase): Promise<boolean> {
  const client = await connect(db, db.database);
  try {
    return (await client.query('SELECT 1 FROM cluster_metadata_info LIMIT 1')).rowCount === 1;
  } finally {
    await client.end();
  }
}

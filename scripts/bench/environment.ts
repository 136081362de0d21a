import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { Client as TemporalClient, Connection } from '@temporalio/client';
import { NativeConnection } from '@temporalio/worker';
import { Client as PgClient } from 'pg';
import { createDb, type Db, migrateLatest } from '../../src/db/knex';
import { startEmbeddedPg } from '../embedded-pg';
import { freePort, stopAll } from '../processes';
import { startTemporalDevServer } from '../temporal-dev-server';
import { findTemporalCli } from '../toolchain';

/** What a Temporal benchmark runs against; `close()` undoes everything, newest first. */
export interface BenchEnvironment {
  /** A fresh database of its own. */
  databaseUrl: string;
  /** Its own `temporal server start-dev`. */
  temporalAddress: string;
  /** That server's process id (for CPU accounting). */
  temporalPid: number | undefined;
  /** Registers a step for `close()`. */
  onClose(step: () => Promise<unknown>): void;
  close(): Promise<void>;
}

/** A Postgres server to create the bench database on: DATABASE_URL's, or an embedded one. */
async function postgres(
  dir: string,
  log: (line: string) => void,
): Promise<{ adminUrl: string; embedded: boolean; stop(): Promise<void> }> {
  if (process.env.DATABASE_URL)
    return { adminUrl: process.env.DATABASE_URL, embedded: false, stop: async () => undefined };
  log('DATABASE_URL is not set: starting an embedded Postgres');
  const pg = await startEmbeddedPg({
    dataDir: join(dir, 'pg'),
    port: await freePort(),
    durable: false,
    timeoutMs: 120_000,
  });
  return { adminUrl: pg.url('postgres'), embedded: true, stop: () => pg.stop() };
}

/**
 * A temporary folder, a `svc_bench_<ts>` database on DATABASE_URL's server (or an embedded
 * Postgres) and a Temporal dev server on free ports with a SQLite file of its own. Ctrl-C and
 * `close()` remove all of it.
 */
export async function startBenchEnvironment(
  name: string,
  namespace: string,
  log: (line: string) => void,
  opts: { temporalArgs?: readonly string[] } = {},
): Promise<BenchEnvironment> {
  const dir = mkdtempSync(join(tmpdir(), `svc-bench-${name}-`));
  const steps: Array<() => Promise<unknown>> = [async () => rmSync(dir, { recursive: true, force: true })];
  let closing: Promise<void> | null = null;
  const close = () =>
    (closing ??= (async () => {
      for (const step of steps.reverse()) await step().catch((err) => log(`cleanup: ${String(err)}`));
    })());
  process.once('SIGINT', () => void close().then(() => process.exit(130)));
  try {
    const pg = await postgres(dir, log);
    steps.push(() => pg.stop());
    const database = `svc_bench_${Date.now()}`;
    const admin = new PgClient({ connectionString: pg.adminUrl });
    // The embedded server stops with the other children at close, ending this connection: not an error.
    admin.on('error', (err) => void (pg.embedded || log(`admin connection: ${err.message}`)));
    await admin.connect();
    await admin.query(`CREATE DATABASE ${database}`);
    steps.push(async () => {
      // An embedded server goes whole, with its directory; a server of DATABASE_URL keeps running.
      if (!pg.embedded) await admin.query(`DROP DATABASE IF EXISTS ${database} WITH (FORCE)`);
      await admin.end().catch(() => undefined);
    });
    const url = new URL(pg.adminUrl);
    url.pathname = `/${database}`;

    const [port, uiPort] = [await freePort(), await freePort()];
    log(`Starting temporal server start-dev on 127.0.0.1:${port} (SQLite in ${dir})...`);
    const server = await startTemporalDevServer({
      cli: findTemporalCli(),
      port,
      uiPort,
      dbFile: join(dir, 'temporal.db'),
      namespace,
      logFile: join(dir, 'temporal.log'),
      timeoutMs: 120_000,
      extraArgs: opts.temporalArgs,
    });
    steps.push(() => stopAll());
    return {
      databaseUrl: url.toString(),
      temporalAddress: server.address,
      temporalPid: server.child.pid,
      onClose: (step) => steps.push(step),
      close,
    };
  } catch (err) {
    await close();
    throw err;
  }
}

/** What a benchmark's stack connects with (all closed with the environment). */
export interface StackConnections {
  /** The API's pool and the worker's, apart as in two processes; the schema is migrated. */
  appDb: Db;
  workerDb: Db;
  /** For workers. */
  nativeConnection: NativeConnection;
  /** For starting and signalling workflows. */
  temporal: TemporalClient;
}

/** Opens the pools (and migrates) and the Temporal connections a benchmark's stack runs on. */
export async function connectStack(
  env: BenchEnvironment,
  namespace: string,
  poolMax: number,
): Promise<StackConnections> {
  const appDb = createDb(env.databaseUrl, poolMax);
  const workerDb = createDb(env.databaseUrl, poolMax);
  env.onClose(() => Promise.all([appDb.destroy(), workerDb.destroy()]));
  await migrateLatest(appDb);
  const nativeConnection = await NativeConnection.connect({ address: env.temporalAddress });
  const connection = await Connection.connect({ address: env.temporalAddress });
  env.onClose(() => Promise.all([nativeConnection.close(), connection.close()]));
  return { appDb, workerDb, nativeConnection, temporal: new TemporalClient({ connection, namespace }) };
}

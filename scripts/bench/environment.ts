import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { Client as TemporalClient, Connection } from '@temporalio/client';
import { NativeConnection } from '@temporalio/worker';
import { Client as PgClient } from 'pg';
import { createDb, type Db, migrateLatest } from '../../src/db/knex';
import { startOwnCluster } from '../cluster/cluster';
import { HISTORY_SHARDS, NAMESPACE_RETENTION } from '../cluster/settings';
import { startEmbeddedPg } from '../embedded-pg';
import { freePort, repoRoot, scrape, stopAll, sumLines } from '../processes';
import { startTemporalDevServer } from '../temporal-dev-server';
import { findTemporalCli } from '../toolchain';
import type { CpuGroups } from './cpu';

/**
 * The Temporal a benchmark runs on: its own `temporal server start-dev` (SQLite in the process), or
 * with BENCH_TEMPORAL=cluster a self-hosted cluster of its own (scripts/cluster/: six processes,
 * BENCH_HISTORY_SHARDS shards, default the production count) with its two databases on the bench's
 * Postgres server.
 */
export interface BenchTemporal {
  kind: 'dev server' | 'cluster';
  /** Names it in the output: `Temporal dev server`, `Temporal cluster (6 processes, 512 shards)`. */
  label: string;
  /** Its processes, for CPU accounting. */
  pids(): number[];
  /** The cluster's Postgres backends (its two databases), for CPU accounting; the dev server has none. */
  postgresBackends?: () => Promise<number[]>;
  /** Its history shards (the dev server has one). */
  historyShards?: number;
  /** Its mutable-state writes so far, summed over its history processes (`state_transition_count_count`). */
  stateTransitions?: () => Promise<number>;
}

/** What a Temporal benchmark runs against; `close()` undoes everything, newest first. */
export interface BenchEnvironment {
  /** A fresh database of its own. */
  databaseUrl: string;
  /** Its own Temporal's frontend. */
  temporalAddress: string;
  temporal: BenchTemporal;
  /** Registers a step for `close()`. */
  onClose(step: () => Promise<unknown>): void;
  close(): Promise<void>;
}

/** BENCH_TEMPORAL: `dev` (default) or `cluster`. */
export function benchTemporalKind(env: NodeJS.ProcessEnv = process.env): BenchTemporal['kind'] {
  const kind = env.BENCH_TEMPORAL ?? 'dev';
  if (kind !== 'dev' && kind !== 'cluster') throw new Error('BENCH_TEMPORAL must be dev or cluster.');
  return kind === 'cluster' ? 'cluster' : 'dev server';
}

/** The CPU groups of the bench's Temporal: its processes, and the cluster's Postgres backends. */
export function temporalCpuGroups(temporal: BenchTemporal): CpuGroups {
  return {
    [temporal.label]: async () => temporal.pids(),
    ...(temporal.postgresBackends ? { [POSTGRES_OF_TEMPORAL]: temporal.postgresBackends } : {}),
  };
}

/** The CPU group of the cluster's Postgres backends. */
export const POSTGRES_OF_TEMPORAL = "Postgres (the cluster's databases' backends)";

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
 * Postgres) and a Temporal of its own (BenchTemporal: a dev server on free ports with a SQLite file
 * of its own, or a cluster). Ctrl-C and `close()` remove all of it.
 */
export async function startBenchEnvironment(
  name: string,
  namespace: string,
  log: (line: string) => void,
  opts: { temporalArgs?: readonly string[] } = {},
): Promise<BenchEnvironment> {
  const dir = mkdtempSync(join(tmpdir(), `svc-bench-${name}-`));
  // BENCH_KEEP=1 keeps the folder (the Temporal server's log and SQLite file) for a post-mortem.
  const keep = process.env.BENCH_KEEP === '1';
  const steps: Array<() => Promise<unknown>> = [
    async () => (keep ? log(`BENCH_KEEP=1: kept ${dir}`) : rmSync(dir, { recursive: true, force: true })),
  ];
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

    const temporal = await startTemporal(name, namespace, dir, pg.adminUrl, database, admin, steps, log, opts);
    return {
      databaseUrl: url.toString(),
      temporalAddress: temporal.address,
      temporal: temporal.temporal,
      onClose: (step) => steps.push(step),
      close,
    };
  } catch (err) {
    await close();
    throw err;
  }
}

/** The bench's Temporal (see BenchTemporal); its stop is pushed onto `steps`. */
async function startTemporal(
  name: string,
  namespace: string,
  dir: string,
  adminUrl: string,
  benchDatabase: string,
  admin: PgClient,
  steps: Array<() => Promise<unknown>>,
  log: (line: string) => void,
  opts: { temporalArgs?: readonly string[] },
): Promise<{ address: string; temporal: BenchTemporal }> {
  if (benchTemporalKind() === 'cluster') {
    if (opts.temporalArgs?.length)
      throw new Error('BENCH_TEMPORAL_ARGS are dev server flags: not with BENCH_TEMPORAL=cluster.');
    const historyShards = Number(process.env.BENCH_HISTORY_SHARDS ?? HISTORY_SHARDS);
    log(
      `Starting a Temporal cluster of the bench's own (${historyShards} history shards, databases ${benchDatabase}_temporal*)...`,
    );
    const cluster = await startOwnCluster({
      dataDir: join(repoRoot, '.data'),
      databaseUrl: adminUrl,
      databasePrefix: `${benchDatabase}_temporal`,
      namespace,
      retention: NAMESPACE_RETENTION,
      temporalCli: findTemporalCli(),
      timeoutMs: 300_000,
      historyShards,
      say: log,
    });
    steps.push(() => cluster.close());
    steps.push(() => stopAll()); // the bench's own children (workers), before the cluster
    const { state } = cluster;
    const databases = [state.database.database, state.database.visibilityDatabase];
    const history = state.processes.filter((p) => p.service === 'history');
    return {
      address: state.address,
      temporal: {
        kind: 'cluster',
        label: `Temporal cluster (${state.processes.length} processes, ${state.historyShards} shards)`,
        pids: () => state.processes.map((p) => p.pid),
        postgresBackends: async () =>
          (
            await admin.query<{ pid: number }>('SELECT pid FROM pg_stat_activity WHERE datname = ANY($1)', [databases])
          ).rows.map((r) => r.pid),
        historyShards: state.historyShards,
        stateTransitions: async () => {
          let total = 0;
          for (const p of history) total += await stateTransitionsAt(p.ports.metrics);
          return total;
        },
      },
    };
  }
  log(`Starting temporal server start-dev (SQLite in ${dir})...`);
  // Its metrics (state transitions, as the cluster's) on a port of their own.
  const metricsPort = await freePort();
  const server = await startTemporalDevServer({
    cli: findTemporalCli(),
    dbFile: join(dir, 'temporal.db'),
    namespace,
    logFile: join(dir, 'temporal.log'),
    timeoutMs: 120_000,
    extraArgs: ['--metrics-port', String(metricsPort), ...(opts.temporalArgs ?? [])],
  });
  log(`  on ${server.address}`);
  steps.push(() => stopAll());
  const pid = server.child.pid;
  return {
    address: server.address,
    temporal: {
      kind: 'dev server',
      label: 'Temporal dev server',
      pids: () => (pid ? [pid] : []),
      historyShards: 1, // the dev server's default
      stateTransitions: () => stateTransitionsAt(metricsPort),
    },
  };
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

/** The mutable-state writes a Temporal process has counted (`state_transition_count_count`) from its metrics on `port`. */
async function stateTransitionsAt(port: number): Promise<number> {
  const text = await scrape(`http://127.0.0.1:${port}/metrics`);
  return sumLines(text, (line) => line.startsWith('state_transition_count_count')) ?? 0;
}

/**
 * Counts the Temporal server's state transitions from now: `stop()` returns how many happened
 * (undefined when it exports no such count).
 */
export async function meterTransitions(temporal: BenchTemporal): Promise<{ stop(): Promise<number | undefined> }> {
  const read = temporal.stateTransitions;
  const before = read ? await read() : 0;
  return { stop: async () => (read ? (await read()) - before : undefined) };
}

/** One line on the server's state transitions per operation and per shard-second; '' when not counted. */
export function transitionsLine(
  temporal: BenchTemporal,
  what: string,
  transitions: number | undefined,
  operations: number,
  seconds: number,
): string {
  if (transitions === undefined || !temporal.historyShards) return '';
  const perSecond = transitions / seconds;
  return (
    `${what}: ${transitions} state transitions, ${(transitions / Math.max(operations, 1)).toFixed(1)} per operation, ` +
    `${perSecond.toFixed(0)}/s over ${seconds.toFixed(1)} s = ${(perSecond / temporal.historyShards).toFixed(2)}/s per shard ` +
    `(${temporal.historyShards} shards)`
  );
}

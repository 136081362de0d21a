import { lstatSync, readlinkSync } from 'node:fs';
import { join, relative, resolve } from 'node:path';
import { Connection } from '@temporalio/client';
import { loadSettings, requireDatabaseUrl, type Settings } from '../src/config';
import { createDb, migrateLatest, type Db } from '../src/db/knex';
import { createDemo } from '../src/ops/demo';
import { promoteBuild } from '../src/ops/release';
import { temporalConnectionOptions } from '../src/temporal/client';
import { describeDeployment, deploymentVersionOf, releaseTargetOf } from '../src/temporal/deployment';
import { runningCluster, startCluster, stopCluster } from './cluster/cluster';
import { NAMESPACE_RETENTION } from './cluster/settings';
import { startEmbeddedPg } from './embedded-pg';
import { assertPortFree, repoRoot, SERVICE_NODE_FLAGS, startChild, stopAll, waitFor, type Child } from './processes';
import { startTemporalDevServer } from './temporal-dev-server';
import { findTemporalCli } from './toolchain';

/**
 * `npm start`: the whole service on one machine. Embedded Postgres unless DATABASE_URL is set, a
 * Temporal dev server unless TEMPORAL_ADDRESS is set (TEMPORAL_MODE=cluster: the self-hosted
 * cluster of `npm run cluster` instead, started here when none runs), migrations, demo data on the
 * first run, then the worker and the API. Ctrl-C stops everything in reverse order and exits 0.
 */

const DEFAULT_EMBEDDED_PG_PORT = 5433;
const DEFAULT_TEMPORAL_PORT = 7233;
const DEFAULT_TEMPORAL_UI_PORT = 8233;
const APP_DATABASE = 'svc';
/** Generous: a loaded two-core machine can take tens of seconds to start each piece. */
const STARTUP_TIMEOUT_MS = 120_000;

/** Ports `npm start` binds, each overridable by env so a clash has a clear way out. */
interface Ports {
  postgres: number;
  temporal: number;
  temporalUi: number;
}

let stopping = false;
/** The API and the worker, stopped before a cluster this script started. */
const services: Child[] = [];
/** Stops the Temporal cluster when this script started it (not one `npm run cluster` left running). */
let stopOwnCluster: (() => Promise<unknown>) | undefined;

/** Which Temporal `npm start` runs when TEMPORAL_ADDRESS is unset: the CLI's dev server (default) or the cluster. */
function temporalMode(env: NodeJS.ProcessEnv): 'dev' | 'cluster' {
  const mode = env.TEMPORAL_MODE ?? 'dev';
  if (mode !== 'dev' && mode !== 'cluster') throw new Error('TEMPORAL_MODE must be dev or cluster.');
  return mode;
}

/** Stops every child (API and worker, then Temporal, then Postgres) and exits with `code`; runs once. */
async function shutdown(code: number, reason?: string): Promise<void> {
  if (stopping) return;
  stopping = true;
  if (reason) process.stderr.write(`\n${reason}\n`);
  process.stdout.write('Stopping...\n');
  if (stopOwnCluster) {
    for (const service of services) await service.stop();
    await stopOwnCluster().catch((err: unknown) =>
      process.stderr.write(`Stopping the Temporal cluster: ${String(err)}\n`),
    );
  }
  await stopAll();
  process.stdout.write('Stopped.\n');
  process.exit(code);
}

/** Ends the whole stack when `child` exits on its own. */
function superviseChild(child: Child): void {
  void child.exited.then(() => shutdown(1, `${child.report()} Stopping everything.`));
}

/** Reads the ports to use from env, with the defaults above. */
function readPorts(): Ports {
  const port = (name: string, fallback: number) => {
    const value = Number(process.env[name] ?? fallback);
    if (!Number.isInteger(value) || value < 1 || value > 65535) throw new Error(`${name} must be a TCP port number.`);
    return value;
  };
  return {
    postgres: port('EMBEDDED_PG_PORT', DEFAULT_EMBEDDED_PG_PORT),
    temporal: port('TEMPORAL_DEV_PORT', DEFAULT_TEMPORAL_PORT),
    temporalUi: port('TEMPORAL_UI_PORT', DEFAULT_TEMPORAL_UI_PORT),
  };
}

/** Fails early, naming the setting to change, when a port we are about to bind is taken. */
async function checkPorts(settings: Settings, ports: Ports, devServer: boolean): Promise<void> {
  const another = 'Is another `npm start` running?';
  if (!settings.DATABASE_URL) {
    await assertPortFree(
      ports.postgres,
      '127.0.0.1',
      'embedded Postgres',
      `${another} Or set EMBEDDED_PG_PORT or DATABASE_URL.`,
    );
  }
  if (devServer) {
    await assertPortFree(
      ports.temporal,
      '127.0.0.1',
      'Temporal dev server',
      `${another} Or set TEMPORAL_DEV_PORT or TEMPORAL_ADDRESS.`,
    );
    await assertPortFree(ports.temporalUi, '127.0.0.1', 'Temporal Web UI', `${another} Or set TEMPORAL_UI_PORT.`);
  }
  await assertPortFree(settings.PORT, settings.HOST, 'API', `${another} Or set PORT.`);
  const metrics = [
    [settings.METRICS_PORT, settings.METRICS_HOST, 'API metrics', 'METRICS_PORT'],
    [settings.WORKER_METRICS_PORT, settings.METRICS_HOST, 'worker metrics', 'WORKER_METRICS_PORT'],
    [
      settings.WORKER_METRICS_PORT && settings.TEMPORAL_SDK_METRICS_PORT,
      '127.0.0.1',
      'Temporal SDK metrics',
      'TEMPORAL_SDK_METRICS_PORT',
    ],
  ] as const;
  for (const [port, host, what, name] of metrics) {
    if (port) await assertPortFree(port, host, what, `${another} Or set ${name} (off for none).`);
  }
}

/** The banner line naming the metrics servers, or none when both are off. */
function metricsLine(settings: Settings): string[] {
  const host = settings.METRICS_HOST.includes(':') ? `[${settings.METRICS_HOST}]` : settings.METRICS_HOST;
  const urls = [
    settings.METRICS_PORT ? `API http://${host}:${settings.METRICS_PORT}/metrics` : '',
    settings.WORKER_METRICS_PORT ? `worker http://${host}:${settings.WORKER_METRICS_PORT}/metrics` : '',
  ].filter(Boolean);
  return urls.length ? [`Metrics:      ${urls.join(', ')}  (and /livez, /readyz)`] : [];
}

/** Starts embedded Postgres in DATA_DIR/pg and returns the URL of the app database. */
async function startPostgres(dataDir: string, port: number): Promise<string> {
  const pg = await startEmbeddedPg({
    dataDir: join(dataDir, 'pg'),
    port,
    durable: true,
    timeoutMs: STARTUP_TIMEOUT_MS,
  });
  superviseChild(pg.child);
  await pg.ensureDatabase(APP_DATABASE);
  return pg.url(APP_DATABASE);
}

/** Starts the Temporal dev server with its state in DATA_DIR/temporal.db and returns its address. */
async function startTemporal(dataDir: string, ports: Ports, namespace: string): Promise<string> {
  const server = await startTemporalDevServer({
    cli: findTemporalCli(),
    port: ports.temporal,
    uiPort: ports.temporalUi,
    dbFile: join(dataDir, 'temporal.db'),
    namespace,
    logFile: join(dataDir, 'temporal.log'),
    timeoutMs: STARTUP_TIMEOUT_MS,
  });
  superviseChild(server.child);
  return server.address;
}

/**
 * The cluster of `npm run cluster` when one runs in DATA_DIR/cluster; else starts it on the
 * Postgres server of `databaseUrl` (built on the first run) and stops it with this script.
 */
async function useCluster(dataDir: string, databaseUrl: string, namespace: string): Promise<string> {
  const dir = join(dataDir, 'cluster');
  const running = runningCluster(dir);
  if (running) return running.address;
  const cluster = await startCluster({
    dir,
    databaseUrl,
    namespace,
    retention: NAMESPACE_RETENTION,
    temporalCli: findTemporalCli(),
    timeoutMs: 4 * STARTUP_TIMEOUT_MS,
    say: (line) => process.stdout.write(`${line}\n`),
  });
  stopOwnCluster = () => stopCluster(dir);
  return cluster.state.address;
}

/** Applies migrations and, when the database has no sellers and no merchants, creates the demo data. */
async function prepareDatabase(settings: Settings, databaseUrl: string): Promise<void> {
  const db = createDb(databaseUrl, 2);
  try {
    const applied = await migrateLatest(db);
    process.stdout.write(
      applied.length ? `Applied ${applied.length} migration(s).\n` : 'Database schema is up to date.\n',
    );
    if (await isEmpty(db)) printDemo(await createDemo(db, settings));
  } finally {
    await db.destroy();
  }
}

/** True on a first run: no seller and no merchant yet. */
async function isEmpty(db: Db): Promise<boolean> {
  const seller = await db('sellers').first('id');
  const merchant = await db('merchants').first('id');
  return !seller && !merchant;
}

/** Prints the demo data, which includes keys that are shown only this once. */
function printDemo(demo: unknown): void {
  process.stdout.write(
    '\nFirst run: created demo data. Keep the keys; they are shown only now ' +
      '(`npm run -s ops -- demo` makes another set):\n' +
      `${JSON.stringify(demo, null, 2)}\n\n`,
  );
}

/**
 * Starts a TypeScript entry point of the service with `env`, with an IPC channel for its `ready`
 * message; its stop waits for its graceful stop (the drain, the in-flight bound and the close).
 */
function startService(name: string, entry: string, env: NodeJS.ProcessEnv): Child {
  const { SHUTDOWN_DRAIN_MS, SHUTDOWN_TIMEOUT_MS } = loadSettings(env);
  const child = startChild(
    name,
    process.execPath,
    [...SERVICE_NODE_FLAGS, '--import', 'tsx', entry],
    { cwd: repoRoot, env, stdio: ['inherit', 'inherit', 'inherit', 'ipc'] },
    // The drain, the in-flight bound, then (worker) cancelled activities' 3 s, the loops' last pass
    // and (both) the close, 5 s each at most, and a margin.
    { stopGraceMs: SHUTDOWN_DRAIN_MS + SHUTDOWN_TIMEOUT_MS + 15_000 },
  );
  superviseChild(child);
  services.push(child);
  return child;
}

/** Resolves when `child` sends `ready` (the worker does once it polls its task queue). */
function readyMessage(child: Child): () => Promise<boolean> {
  let ready = false;
  child.onMessage((message) => {
    if (message === 'ready') ready = true;
  });
  return () => Promise.resolve(ready);
}

/**
 * The worker's build, made current on the dev server `npm start` runs: that server is this
 * developer's own, so a build whose version changed since the last start must not leave new
 * workflows waiting for a promotion (a worker only promotes itself on a brand-new deployment).
 * On an external server it only says where the build stands: promoting there is the operator's.
 */
async function ownBuildLine(settings: Settings, promote: boolean): Promise<string> {
  const version = deploymentVersionOf(settings);
  if (!version) return 'Worker build: unversioned (TEMPORAL_WORKER_VERSIONING=off)';
  const named = `${version.buildId} of deployment ${version.deploymentName}`;
  const connection = await Connection.connect({ ...temporalConnectionOptions(settings), connectTimeout: '10s' });
  try {
    const target = releaseTargetOf(settings);
    if (promote) {
      const promoted = await promoteBuild(connection, target, {
        buildId: version.buildId,
        waitMs: STARTUP_TIMEOUT_MS,
        identity: 'npm start',
      });
      const before = promoted.previous_build_id ?? 'the unversioned workers';
      return `Worker build: ${named}, ${promoted.changed ? `promoted by npm start (current before: ${before})` : 'current'}`;
    }
    const current = (await describeDeployment(connection, target))?.current ?? null;
    if (current === version.buildId) return `Worker build: ${named}, current`;
    return `Worker build: ${named}, not current (current: ${current ?? 'the unversioned workers'}; \`npm run ops -- release promote\` makes it current)`;
  } finally {
    await connection.close();
  }
}

/** True when the API's health route answers 200. */
async function healthy(url: string): Promise<boolean> {
  const res = await fetch(url, { signal: AbortSignal.timeout(2000) });
  return res.status === 200;
}

/** `path` relative to the repository when inside it, else absolute; a symlink with its target. */
function displayPath(path: string): string {
  const rel = relative(repoRoot, path);
  const shown = rel.startsWith('..') ? path : rel;
  return lstatSync(path, { throwIfNoEntry: false })?.isSymbolicLink() ? `${shown} -> ${readlinkSync(path)}` : shown;
}

/** The URL with any password replaced, safe to print. */
function redact(url: string): string {
  const parsed = new URL(url);
  if (parsed.password) parsed.password = '***';
  return parsed.toString();
}

/** Treats `NAME=` (empty) like unset for the settings that switch embedded services on. */
function withoutEmptySwitches(env: NodeJS.ProcessEnv): NodeJS.ProcessEnv {
  const copy = { ...env };
  for (const name of ['DATABASE_URL', 'TEMPORAL_ADDRESS']) if (copy[name] === '') delete copy[name];
  return copy;
}

async function main(): Promise<void> {
  process.on('SIGINT', () => void shutdown(0));
  process.on('SIGTERM', () => void shutdown(0));
  const env = withoutEmptySwitches(process.env);
  const settings = loadSettings(env);
  const ports = readPorts();
  const dataDir = resolve(repoRoot, settings.DATA_DIR);
  const mode = temporalMode(env);
  const embeddedPg = !settings.DATABASE_URL;
  const embeddedTemporal = !settings.TEMPORAL_ADDRESS && mode === 'dev';
  const ownCluster = !settings.TEMPORAL_ADDRESS && mode === 'cluster';
  await checkPorts(settings, ports, embeddedTemporal);

  if (embeddedPg) env.DATABASE_URL = await startPostgres(dataDir, ports.postgres);
  if (embeddedTemporal) env.TEMPORAL_ADDRESS = await startTemporal(dataDir, ports, settings.TEMPORAL_NAMESPACE);
  if (ownCluster) env.TEMPORAL_ADDRESS = await useCluster(dataDir, env.DATABASE_URL!, settings.TEMPORAL_NAMESPACE);
  const runSettings = loadSettings(env);
  const databaseUrl = requireDatabaseUrl(runSettings);
  await prepareDatabase(runSettings, databaseUrl);

  // A person at a terminal reads log lines, a collector reads JSON: pretty lines only for the former.
  if (process.stderr.isTTY) env.LOG_FORMAT ??= 'pretty';
  // No load balancer to wait for here: Ctrl-C stops the API at once (requests in flight still finish).
  env.SHUTDOWN_DRAIN_MS ??= '0';
  const worker = startService('worker', 'src/main/worker.ts', env);
  const workerReady = readyMessage(worker);
  const api = startService('API', 'src/main/api.ts', env);
  const probeHost = ['0.0.0.0', '::'].includes(settings.HOST) ? '127.0.0.1' : settings.HOST;
  const healthUrl = `http://${probeHost}:${settings.PORT}/partner/v1/health`;
  // Both before the banner, so that their start-up lines come before it and `ready` is last.
  const watched = { timeoutMs: STARTUP_TIMEOUT_MS, watched: [api, worker] };
  await waitFor(`the API at ${healthUrl}`, () => healthy(healthUrl), watched);
  await waitFor('the worker to poll its task queue', workerReady, watched);
  const buildLine = await ownBuildLine(runSettings, embeddedTemporal || ownCluster);

  const lines = [
    '',
    `API:          http://localhost:${settings.PORT}  (health: http://localhost:${settings.PORT}/partner/v1/health)`,
    embeddedTemporal
      ? `Temporal UI:  http://localhost:${ports.temporalUi}  (server ${env.TEMPORAL_ADDRESS}, log ${displayPath(join(dataDir, 'temporal.log'))})`
      : ownCluster
        ? `Temporal:     ${env.TEMPORAL_ADDRESS}, namespace ${settings.TEMPORAL_NAMESPACE} (cluster, ${stopOwnCluster ? 'stops with npm start' : 'of npm run cluster'}; ${displayPath(join(dataDir, 'cluster'))})`
        : `Temporal:     ${env.TEMPORAL_ADDRESS}, namespace ${settings.TEMPORAL_NAMESPACE} (external)`,
    `Console:      ${settings.PUBLIC_BASE_URL.replace(/\/+$/, '')}/console/sign-in  (demo sign-in: \`console\` in the demo data printed on the first run; \`npm run -s ops -- demo\` makes another)`,
    `Database:     ${redact(databaseUrl)}${embeddedPg ? `  (embedded, data in ${displayPath(join(dataDir, 'pg'))})` : ''}`,
    ...metricsLine(settings),
    buildLine,
    `Ops CLI:      DATABASE_URL=${redact(databaseUrl)} TEMPORAL_ADDRESS=${env.TEMPORAL_ADDRESS} npm run -s ops -- <group> <command>`,
    'ready: press Ctrl-C to stop',
    '',
  ];
  process.stdout.write(lines.join('\n'));
}

main().catch((err: unknown) => {
  void shutdown(1, `npm start failed: ${err instanceof Error ? err.message : String(err)}`);
});

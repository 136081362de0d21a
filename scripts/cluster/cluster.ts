import { execFile, spawn } from 'node:child_process';
import { closeSync, existsSync, mkdirSync, openSync, readdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { promisify } from 'node:util';
import { Connection } from '@temporalio/client';
import { missingSearchAttributes, searchAttributeCreateArgs } from '../../src/temporal/search-attribute-setup';
import { createServer } from 'node:net';
import { logTail, waitFor } from '../processes';
import { ensureServerBuilt } from './build';
import {
  CLUSTER_HOST,
  clusterDatabaseFromUrl,
  serverConfig,
  serverConfigYaml,
  type ClusterDatabase,
  type ProcessPorts,
  type ServicePorts,
} from './config';
import { dropClusterDatabases, ensureSchema, hasClusterMetadata, liveMembers, type Member } from './schema';
import {
  CLUSTER_PROCESSES,
  HISTORY_SHARDS,
  serverBinary,
  TEMPORAL_DATABASE,
  TEMPORAL_SERVER_VERSION,
  VISIBILITY_DATABASE,
} from './settings';

const runFile = promisify(execFile);

/** What a running cluster is, written to <dir>/cluster.json for `stop`, `npm start` and the tests. */
export interface ClusterState {
  version: string;
  /** host:port of the frontend, for TEMPORAL_ADDRESS. */
  address: string;
  namespace: string;
  historyShards: number;
  database: Omit<ClusterDatabase, 'password'>;
  processes: { name: string; service: string; pid: number; ports: ProcessPorts; config: string; log: string }[];
}

export interface StartClusterOptions {
  /** Where pid files, configs, logs and cluster.json go (.data/cluster). */
  dir: string;
  /** Any URL on the Postgres server to hold the Temporal databases (DATABASE_URL). */
  databaseUrl: string;
  namespace: string;
  /** Namespace retention for closed workflows. */
  retention: string;
  temporalCli: string;
  timeoutMs: number;
  say: (line: string) => void;
  /** Database names (default temporal, temporal_visibility, as docker-compose.yml has them). */
  databases?: { database: string; visibilityDatabase: string };
  /** History shards of new databases (default HISTORY_SHARDS; fixed once the databases exist). */
  historyShards?: number;
}

export interface StartedCluster {
  state: ClusterState;
  buildSeconds: number;
  members: Member[];
  /** False when a cluster was already running in `dir` and is reused as it is. */
  started: boolean;
}

const stateFile = (dir: string) => join(dir, 'cluster.json');

/** The cluster recorded in `dir`, or null when none is. */
export function readClusterState(dir: string): ClusterState | null {
  const file = stateFile(dir);
  return existsSync(file) ? (JSON.parse(readFileSync(file, 'utf8')) as ClusterState) : null;
}

/**
 * True when `pid` is alive and still runs our server binary (a pid file can outlive its process,
 * and the number be reused by another).
 */
function isOurs(pid: number): boolean {
  try {
    return readFileSync(`/proc/${pid}/cmdline`, 'utf8').split('\0')[0] === serverBinary;
  } catch {
    return false;
  }
}

/** The processes of the cluster recorded in `dir` that do not run (killed by a fault, or exited). */
export function stoppedClusterProcesses(dir: string): string[] {
  return (readClusterState(dir)?.processes ?? []).filter((p) => !isOurs(p.pid)).map((p) => p.name);
}

/** The recorded cluster when all of its processes run. */
export function runningCluster(dir: string): ClusterState | null {
  const state = readClusterState(dir);
  return state && state.processes.every((p) => isOurs(p.pid)) ? state : null;
}

/**
 * Builds the pinned release if needed, prepares the databases with the SQL tool, writes one config
 * per process and starts them detached (they outlive this script; pid files in `dir`), waits for
 * membership and the frontend's health, then creates the namespace and our search attributes as an
 * operator does. A cluster already running in `dir` is reused.
 */
export async function startCluster(options: StartClusterOptions): Promise<StartedCluster> {
  const { dir, say } = options;
  const db = clusterDatabaseFromUrl(
    options.databaseUrl,
    options.databases ?? { database: TEMPORAL_DATABASE, visibilityDatabase: VISIBILITY_DATABASE },
  );
  const running = runningCluster(dir);
  if (running) return { state: running, buildSeconds: 0, members: await liveMembers(db), started: false };
  await stopCluster(dir, say); // leftovers of a cluster that half died
  await refuseSharedDatabases(db);

  const buildSeconds = await ensureServerBuilt(say);
  say(
    buildSeconds
      ? `Built in ${buildSeconds} s.`
      : `Temporal server ${TEMPORAL_SERVER_VERSION}: reusing the build in .tools/.`,
  );
  for (const kind of ['persistence', 'visibility'] as const) say(`  ${await ensureSchema(db, kind)}`);

  mkdirSync(dir, { recursive: true });
  const ports = new Map<string, ProcessPorts>();
  const taken = new Set<number>();
  const port = () => freeLowPort(taken);
  for (const p of CLUSTER_PROCESSES) {
    const entry: ProcessPorts = { grpc: await port(), membership: await port(), metrics: await port() };
    if (p.service === 'frontend') entry.http = await port();
    ports.set(p.name, entry);
  }
  const peers = Object.fromEntries(
    [...CLUSTER_PROCESSES].reverse().map((p) => [p.service, ports.get(p.name)!]),
  ) as ServicePorts;
  const frontend = peers.frontend;

  const state: ClusterState = {
    version: TEMPORAL_SERVER_VERSION,
    address: `${CLUSTER_HOST}:${frontend.grpc}`,
    namespace: options.namespace,
    historyShards: options.historyShards ?? HISTORY_SHARDS,
    database: {
      host: db.host,
      port: db.port,
      user: db.user,
      database: db.database,
      visibilityDatabase: db.visibilityDatabase,
    },
    processes: [],
  };
  try {
    // On new databases the first process writes the cluster's metadata record; two writing it at
    // once fail one of them ("Failed to apply cluster metadata"), so the others wait for it.
    const fresh = !(await hasClusterMetadata(db));
    for (const [i, p] of CLUSTER_PROCESSES.entries()) {
      const configFile = join(dir, `${p.name}.yaml`);
      const log = join(dir, `${p.name}.log`);
      const config = serverConfig(p.service, ports.get(p.name)!, peers, db, state.historyShards);
      writeFileSync(configFile, serverConfigYaml(config), { mode: 0o600 });
      const pid = spawnServer(dir, p.name, p.service, configFile, log);
      state.processes.push({
        name: p.name,
        service: p.service,
        pid,
        ports: ports.get(p.name)!,
        config: configFile,
        log,
      });
      writeState(dir, state);
      if (i === 0 && fresh) await untilMetadataWritten(state.processes[0], db, options.timeoutMs);
    }
    const members = await waitUntilServing(state, db, options);
    await createNamespace(state, options);
    await createSearchAttributes(state, options);
    return { state, buildSeconds, members, started: true };
  } catch (err) {
    await stopCluster(dir, say);
    throw err;
  }
}

/**
 * A free loopback port below 32768, none of `taken`: Temporal's SQL schema records a member's port
 * in a SMALLINT (cluster_membership.rpc_port), so the kernel's ephemeral ports (32768 and up) make
 * every service die at its first membership heartbeat ("value out of range for type smallint").
 */
async function freeLowPort(taken: Set<number>): Promise<number> {
  for (let tries = 0; tries < 200; tries++) {
    const port = 20_000 + Math.floor(Math.random() * 12_000);
    if (taken.has(port)) continue;
    const free = await new Promise<boolean>((resolveFree) => {
      const server = createServer();
      server.once('error', () => resolveFree(false));
      server.listen(port, CLUSTER_HOST, () => server.close(() => resolveFree(true)));
    });
    if (free) {
      taken.add(port);
      return port;
    }
  }
  throw new Error('no free port between 20000 and 32000 on 127.0.0.1');
}

const writeState = (dir: string, state: ClusterState) =>
  writeFileSync(stateFile(dir), `${JSON.stringify(state, null, 2)}\n`);

/**
 * Starts one service process of the server binary in its own session with its output appended to
 * `log`, and records its pid file; returns its pid.
 */
function spawnServer(dir: string, name: string, service: string, config: string, log: string): number {
  const fd = openSync(log, 'a');
  const args = ['--config-file', config, '--allow-no-auth', 'start', '--service', service];
  const child = spawn(serverBinary, args, { detached: true, stdio: ['ignore', fd, fd] });
  closeSync(fd);
  child.unref();
  if (child.pid === undefined) throw new Error(`could not start ${serverBinary}`);
  writeFileSync(join(dir, `${name}.pid`), `${child.pid}\n`);
  return child.pid;
}

/** Until the first process of a new cluster has written the cluster metadata record (or exited). */
async function untilMetadataWritten(
  first: ClusterState['processes'][number],
  db: ClusterDatabase,
  timeoutMs: number,
): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  while (!(await hasClusterMetadata(db))) {
    if (!isOurs(first.pid))
      throw new Error(`Temporal ${first.name} exited. Last lines of ${first.log}:\n${logTail(first.log, 5)}`);
    if (Date.now() > deadline)
      throw new Error(`Temporal ${first.name} wrote no cluster metadata within ${timeoutMs / 1000} s.`);
    await new Promise((r) => setTimeout(r, 500));
  }
}

/**
 * Two clusters on the same databases would share their shards and their membership ring: a start
 * is refused while another cluster's members heartbeat in them (another checkout's `npm run
 * cluster`, or one whose pid files were lost).
 */
async function refuseSharedDatabases(db: ClusterDatabase): Promise<void> {
  const others = await liveMembers(db).catch(() => [] as Member[]); // no database yet: nobody there
  if (others.length === 0) return;
  throw new Error(
    `Another Temporal cluster uses the database ${db.database} on ${db.host}:${db.port}: ${others.length} members ` +
      `heartbeat there (${others.map((m) => `${m.role} ${m.address}`).join(', ')}). Stop it first (\`npm run ` +
      'cluster -- stop` in its checkout), or wait 30 s after it died.',
  );
}

/**
 * Kills one process of the running cluster in `dir` with `signal` (a node fault) and waits until
 * it is gone; its pid file stays, so `stop` and `restartClusterProcess` find the cluster.
 */
export async function killClusterProcess(dir: string, name: string, signal: NodeJS.Signals): Promise<void> {
  const p = processOf(dir, name);
  if (isOurs(p.pid)) process.kill(p.pid, signal);
  if (!(await exitsWithin(p.pid, 30_000))) throw new Error(`Temporal ${name} did not exit within 30 s of ${signal}`);
}

/**
 * Starts one process of the cluster in `dir` again, on its own config and ports (after a kill or
 * a stop), and waits until it serves: its metrics answer and it heartbeats in the membership.
 */
export async function restartClusterProcess(
  dir: string,
  name: string,
  databaseUrl: string,
  timeoutMs = 120_000,
): Promise<void> {
  const state = readClusterState(dir);
  const p = state?.processes.find((x) => x.name === name);
  if (!state || !p) throw new Error(`no Temporal process ${name} recorded in ${dir}`);
  if (isOurs(p.pid)) throw new Error(`Temporal ${name} is running (pid ${p.pid}): kill or stop it first`);
  const started = Date.now();
  p.pid = spawnServer(dir, p.name, p.service, p.config, p.log);
  writeState(dir, state);
  const db = clusterDatabaseFromUrl(databaseUrl, state.database);
  const address = new Set([p.ports.membership, p.ports.grpc].map((port) => `${CLUSTER_HOST}:${port}`));
  const serving = async () => {
    const metrics = await fetch(`http://${CLUSTER_HOST}:${p.ports.metrics}/metrics`, {
      signal: AbortSignal.timeout(2000),
    }).then((res) => res.ok);
    // A heartbeat written since the start: the row of the killed process may still look alive.
    return metrics && (await liveMembers(db, (Date.now() - started) / 1000)).some((m) => address.has(m.address));
  };
  for (;;) {
    if (!isOurs(p.pid)) throw new Error(`Temporal ${name} exited. Last lines of ${p.log}:\n${logTail(p.log, 5)}`);
    if (await serving().catch(() => false)) return;
    if (Date.now() - started > timeoutMs)
      throw new Error(`Temporal ${name} did not serve again within ${timeoutMs / 1000} s`);
    await new Promise((r) => setTimeout(r, 500));
  }
}

function processOf(dir: string, name: string): ClusterState['processes'][number] {
  const state = readClusterState(dir);
  const p = state?.processes.find((x) => x.name === name);
  if (!p) throw new Error(`no Temporal process ${name} recorded in ${dir}`);
  return p;
}

/** Every process's metrics endpoint answers, the ring has all six members and the frontend reports SERVING. */
async function waitUntilServing(
  state: ClusterState,
  db: ClusterDatabase,
  options: StartClusterOptions,
): Promise<Member[]> {
  const until = async (what: string, probe: () => Promise<boolean>) => {
    const deadline = Date.now() + options.timeoutMs;
    for (;;) {
      // A process that exits fails the start at once, with its log's last lines.
      const dead = state.processes.find((p) => !isOurs(p.pid));
      if (dead) throw new Error(`Temporal ${dead.name} exited. Last lines of ${dead.log}:\n${logTail(dead.log, 5)}`);
      if (await probe().catch(() => false)) return;
      if (Date.now() > deadline) throw new Error(`${what} did not happen within ${options.timeoutMs / 1000} s.`);
      await new Promise((r) => setTimeout(r, 1000));
    }
  };
  for (const p of state.processes) {
    await until(`Temporal ${p.name} metrics on :${p.ports.metrics}`, async () => {
      const res = await fetch(`http://${CLUSTER_HOST}:${p.ports.metrics}/metrics`, {
        signal: AbortSignal.timeout(2000),
      });
      return res.ok;
    });
  }
  let members: Member[] = [];
  // A member is recorded under its membership (ringpop) port; the gRPC port is accepted too.
  const ours = new Set(
    state.processes.flatMap((p) => [p.ports.membership, p.ports.grpc].map((port) => `${CLUSTER_HOST}:${port}`)),
  );
  await until('all six Temporal services in the membership ring', async () => {
    members = (await liveMembers(db)).filter((m) => ours.has(m.address));
    return members.length === state.processes.length;
  });
  await until(`the Temporal frontend at ${state.address} to report SERVING`, async () =>
    (await clusterHealth(options.temporalCli, state.address)).includes('SERVING'),
  );
  return members;
}

/** `temporal operator cluster health` against `address`: its output. */
export async function clusterHealth(cli: string, address: string): Promise<string> {
  const { stdout } = await runFile(cli, ['operator', 'cluster', 'health', '--address', address], { timeout: 15_000 });
  return stdout.trim();
}

/** `temporal operator namespace create`, unless the namespace exists already. */
async function createNamespace(state: ClusterState, options: StartClusterOptions): Promise<void> {
  const cli = (args: string[]) =>
    runFile(options.temporalCli, [...args, '--address', state.address], { timeout: 30_000 });
  const exists = await cli(['operator', 'namespace', 'describe', '--namespace', state.namespace]).then(
    () => true,
    () => false,
  );
  if (!exists) {
    await cli(['operator', 'namespace', 'create', '--namespace', state.namespace, '--retention', options.retention]);
    options.say(`  namespace ${state.namespace} created (retention ${options.retention})`);
  }
  // A namespace is served once every frontend's namespace cache has it (refreshed every few
  // seconds): `describe` reads the database and finds it at once, the search-attribute list goes
  // through that cache (as starts do) and answers NOT_FOUND until it is refreshed.
  await waitFor(
    `namespace ${state.namespace} on the frontend`,
    () => cli(['operator', 'search-attribute', 'list', '--namespace', state.namespace]).then(() => true),
    { timeoutMs: options.timeoutMs, intervalMs: 1000 },
  );
}

/** The command an operator runs (the one the API and the worker name when attributes are missing), for those missing. */
async function createSearchAttributes(state: ClusterState, options: StartClusterOptions): Promise<void> {
  const connection = await Connection.connect({ address: state.address, connectTimeout: '10s' });
  try {
    const missing = await missingSearchAttributes(connection, state.namespace);
    if (!missing?.length) return;
    await runFile(
      options.temporalCli,
      [...searchAttributeCreateArgs(state.namespace, missing), '--address', state.address],
      { timeout: 30_000 },
    );
    options.say(`  search attributes created: ${missing.join(', ')}`);
    await waitFor(
      'the search attributes on the frontend',
      async () => (await missingSearchAttributes(connection, state.namespace))?.length === 0,
      { timeoutMs: options.timeoutMs, intervalMs: 1000 },
    );
  } finally {
    await connection.close();
  }
}

/**
 * Stops the cluster recorded in `dir`: SIGTERM to each process (frontend first, so clients fail
 * over to nothing rather than to a half-stopped cluster), up to 20 s each, then SIGKILL; removes
 * the pid files. Returns the names it stopped.
 */
export async function stopCluster(dir: string, say: (line: string) => void = () => undefined): Promise<string[]> {
  const state = readClusterState(dir);
  if (!state) return [];
  const order = [...state.processes].sort((a, b) => stopRank(a.service) - stopRank(b.service));
  const stopped: string[] = [];
  for (const p of order) {
    if (isOurs(p.pid)) {
      process.kill(p.pid, 'SIGTERM');
      if (!(await exitsWithin(p.pid, 20_000))) {
        say(`  ${p.name} did not stop within 20 s; killing it`);
        if (isOurs(p.pid)) process.kill(p.pid, 'SIGKILL');
        await exitsWithin(p.pid, 5_000);
      }
      stopped.push(p.name);
    }
    rmSync(join(dir, `${p.name}.pid`), { force: true });
  }
  rmSync(stateFile(dir), { force: true });
  return stopped;
}

const stopRank = (service: string) => ['frontend', 'worker', 'matching', 'history'].indexOf(service);

async function exitsWithin(pid: number, ms: number): Promise<boolean> {
  const deadline = Date.now() + ms;
  while (Date.now() < deadline) {
    if (!isOurs(pid)) return true;
    await new Promise((r) => setTimeout(r, 200));
  }
  return !isOurs(pid);
}

/** A cluster of one run's own (a test run, a bench, the fault suite): its directory and databases. */
export interface OwnCluster {
  state: ClusterState;
  dir: string;
  database: ClusterDatabase;
  buildSeconds: number;
  /** Stops it and drops its databases. */
  close(): Promise<void>;
}

const OWN_CLUSTER_DIR = /^cluster-run-(\d+)$/;

/**
 * Starts a cluster of this process's own in `<dataDir>/cluster-run-<pid>`, on databases of its own
 * (`<databasePrefix>` and `<databasePrefix>_visibility`) on DATABASE_URL's server, so that it
 * never meets another checkout's cluster or another run's. `close()` stops it and drops them.
 * The clusters of runs that died without closing theirs are removed first.
 */
export async function startOwnCluster(
  options: Omit<StartClusterOptions, 'dir' | 'databases'> & { dataDir: string; databasePrefix: string },
): Promise<OwnCluster> {
  await removeClustersOfDeadRuns(options.dataDir, options.databaseUrl);
  const dir = join(options.dataDir, `cluster-run-${process.pid}`);
  const databases = { database: options.databasePrefix, visibilityDatabase: `${options.databasePrefix}_visibility` };
  const database = clusterDatabaseFromUrl(options.databaseUrl, databases);
  const close = () => closeOwnCluster(dir, options.databaseUrl, options.say);
  try {
    const { state, buildSeconds } = await startCluster({ ...options, dir, databases });
    return { state, dir, database, buildSeconds, close };
  } catch (err) {
    await close().catch(() => undefined);
    throw err;
  }
}

/**
 * Stops the cluster of a run in `dir`, drops its databases (when they are on DATABASE_URL's
 * server) and removes the directory.
 */
export async function closeOwnCluster(
  dir: string,
  databaseUrl: string,
  say: (line: string) => void = () => undefined,
): Promise<void> {
  const state = readClusterState(dir);
  await stopCluster(dir, say);
  const db = state && clusterDatabaseFromUrl(databaseUrl, state.database);
  if (db && db.host === state.database.host && db.port === state.database.port) await dropClusterDatabases(db);
  rmSync(dir, { recursive: true, force: true });
}

/** Stops the clusters (and drops the databases) of runs in `dataDir` whose process is gone. */
async function removeClustersOfDeadRuns(dataDir: string, databaseUrl: string): Promise<void> {
  if (!existsSync(dataDir)) return;
  for (const entry of readdirSync(dataDir)) {
    const pid = Number(OWN_CLUSTER_DIR.exec(entry)?.[1]);
    if (!pid || pid === process.pid || isAlive(pid)) continue;
    await closeOwnCluster(join(dataDir, entry), databaseUrl);
  }
}

function isAlive(pid: number): boolean {
  try {
    process.kill(pid, 0);
    return true;
  } catch (err) {
    return (err as NodeJS.ErrnoException).code === 'EPERM';
  }
}

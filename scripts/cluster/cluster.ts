import { execFile, spawn } from 'node:child_process';
import { closeSync, existsSync, mkdirSync, openSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
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
import { ensureSchema, liveMembers, type Member } from './schema';
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
    historyShards: HISTORY_SHARDS,
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
    for (const p of CLUSTER_PROCESSES) {
      const config = join(dir, `${p.name}.yaml`);
      const log = join(dir, `${p.name}.log`);
      writeFileSync(config, serverConfigYaml(serverConfig(p.service, ports.get(p.name)!, peers, db)), {
        mode: 0o600,
      });
      const pid = spawnDetached(['--config-file', config, '--allow-no-auth', 'start', '--service', p.service], log);
      writeFileSync(join(dir, `${p.name}.pid`), `${pid}\n`);
      state.processes.push({ name: p.name, service: p.service, pid, ports: ports.get(p.name)!, config, log });
    }
    writeFileSync(stateFile(dir), `${JSON.stringify(state, null, 2)}\n`);
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

/** Starts the server binary in its own session with its output in `log`; returns its pid. */
function spawnDetached(args: string[], log: string): number {
  const fd = openSync(log, 'a');
  const child = spawn(serverBinary, args, { detached: true, stdio: ['ignore', fd, fd] });
  closeSync(fd);
  child.unref();
  if (child.pid === undefined) throw new Error(`could not start ${serverBinary}`);
  return child.pid;
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
  if (exists) return;
  await cli(['operator', 'namespace', 'create', '--namespace', state.namespace, '--retention', options.retention]);
  options.say(`  namespace ${state.namespace} created (retention ${options.retention})`);
  // A namespace is served once every frontend's namespace cache has it (refreshed every few seconds).
  await waitFor(
    `namespace ${state.namespace} on the frontend`,
    () => cli(['operator', 'namespace', 'describe', '--namespace', state.namespace]).then(() => true),
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

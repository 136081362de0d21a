import { execFileSync } from 'node:child_process';
import { createHash } from 'node:crypto';
import {
  chmodSync,
  cpSync,
  existsSync,
  lstatSync,
  mkdirSync,
  readdirSync,
  readFileSync,
  readlinkSync,
  realpathSync,
  renameSync,
  rmSync,
  statSync,
  symlinkSync,
  writeFileSync,
  type Stats,
} from 'node:fs';
import { tmpdir } from 'node:os';
import { basename, dirname, join, resolve } from 'node:path';
import { repoRoot } from './processes';

/**
 * Where the embedded Postgres keeps its files when we run as root. Postgres then runs as the
 * unprivileged user `postgres`, which cannot traverse a private directory above the checkout (a
 * checkout under /root, or in a `mktemp -d` directory), so it could reach neither the binaries in
 * node_modules nor the data under `.data/`. Everything it must reach lives instead in this
 * checkout's Postgres home: `/var/tmp/svc-payments-marketplace-pg-<hash of the checkout path>`,
 * owned by root and searchable by all, holding a copy of the Postgres binaries and the clusters.
 * The checkout keeps a symlink to each cluster (`.data/pg -> <home>/pg-<hash>`), so deleting
 * `.data/` deletes the cluster too: a cluster whose symlink is gone is removed on the next start.
 * Homes of checkouts that no longer exist are removed whenever any checkout starts Postgres as root.
 */

const HOME_PREFIX = 'svc-payments-marketplace-pg-';
/** A file in each home naming the checkout it belongs to. */
const CHECKOUT_FILE = 'checkout';

/** The account Postgres runs as. */
export interface PostgresUser {
  name: string;
  uid: number;
  gid: number;
}

/** What `postgres` and `initdb` run from, and where they keep a cluster. */
export interface PostgresPlace {
  initdb: string;
  postgres: string;
  /** The real data directory (a symlink in the checkout points to it). */
  dataDir: string;
  /** A working directory the Postgres user can enter. */
  cwd: string;
}

/** This checkout's Postgres home (whether or not it exists yet). */
export function postgresHome(checkout: string = repoRoot): string {
  const base = isDirectory('/var/tmp') ? '/var/tmp' : tmpdir();
  return join(base, HOME_PREFIX + shortHash(realpathSync(checkout), 16));
}

/**
 * As root: prepares this checkout's Postgres home for `user` (a copy of the binaries of the
 * platform package whose `native/` directory is `nativeDir`, and a place for the cluster whose
 * path in the checkout is `dataDir`) and checks that `user` can run Postgres from it.
 */
export function preparePostgresHome(
  nativeDir: string,
  version: string,
  dataDir: string,
  user: PostgresUser,
): PostgresPlace {
  const home = postgresHome();
  removeHomesOfDeletedCheckouts(dirname(home));
  makeHome(home);
  removeLeftoversOfDeadProcesses(home);
  const binaries = copyBinaries(nativeDir, version, home);
  assertRunnable(binaries.postgres, home, user);
  return { ...binaries, dataDir: placeCluster(dataDir, home), cwd: home };
}

/** Deletes the cluster whose path in the checkout is `dataDir` (a directory, or a symlink into a Postgres home) and its log. */
export function removeCluster(dataDir: string): void {
  const entry = lstatOrUndefined(dataDir);
  if (entry?.isSymbolicLink()) {
    const target = readlinkSync(dataDir);
    if (basename(dirname(target)).startsWith(HOME_PREFIX)) rmSync(target, { recursive: true, force: true });
  }
  rmSync(dataDir, { recursive: true, force: true });
  rmSync(`${dataDir}.log`, { force: true });
}

/** True when `pid` names a running process. */
function processAlive(pid: number): boolean {
  try {
    process.kill(pid, 0);
    return true;
  } catch (err) {
    return (err as NodeJS.ErrnoException).code === 'EPERM';
  }
}

/** Creates the home, or checks one left by an earlier run: a real directory that only root can write to. */
function makeHome(home: string): void {
  mkdirSync(home, { recursive: true, mode: 0o755 });
  const stats = lstatSync(home);
  if (!stats.isDirectory() || stats.uid !== process.getuid?.() || (stats.mode & 0o022) !== 0) {
    throw new Error(
      `${home} exists but is not a directory owned by this user that only it can write to; ` +
        `it is not ours to use. Remove it (rm -rf ${home}) and retry.`,
    );
  }
  chmodSync(home, 0o755); // mkdir's mode is reduced by the umask
  writeFileSync(join(home, CHECKOUT_FILE), `${realpathSync(repoRoot)}\n`, { mode: 0o644 });
}

/** The homes in `base` whose checkout is gone: nothing can use them any more. */
function removeHomesOfDeletedCheckouts(base: string): void {
  for (const name of readdirOrEmpty(base)) {
    if (!name.startsWith(HOME_PREFIX)) continue;
    const home = join(base, name);
    const stats = lstatOrUndefined(home);
    if (!stats?.isDirectory() || stats.uid !== process.getuid?.()) continue;
    let checkout: string;
    try {
      checkout = readFileSync(join(home, CHECKOUT_FILE), 'utf8').trim();
    } catch {
      continue; // being created right now, or not ours
    }
    if (checkout && !existsSync(checkout)) rmSync(home, { recursive: true, force: true });
  }
}

/**
 * Removes from `dir` (`.data/` or a Postgres home) the test clusters, initdb staging directories
 * and binary copies of processes that no longer run (a run that was killed leaves them behind).
 */
export function removeLeftoversOfDeadProcesses(dir: string): void {
  for (const name of readdirOrEmpty(dir)) {
    const match = /^test-pg-(\d+)(?:-[0-9a-f]+)?(?:\.log)?$|\.(?:copy|init)-(\d+)$/.exec(name);
    const pid = Number(match?.[1] ?? match?.[2]);
    if (pid && !processAlive(pid)) removeCluster(join(dir, name));
  }
}

/**
 * A copy of `nativeDir` (bin, lib, share) in the home, made once per package version, readable
 * and executable by all whatever the umask was when npm unpacked it.
 */
function copyBinaries(nativeDir: string, version: string, home: string): { initdb: string; postgres: string } {
  const name = `postgres-${version}`;
  const dir = join(home, name);
  const binaries = { initdb: join(dir, 'bin', 'initdb'), postgres: join(dir, 'bin', 'postgres') };
  if (existsSync(binaries.postgres)) return binaries;
  for (const entry of readdirOrEmpty(home)) {
    if (entry.startsWith('postgres-') && !entry.includes('.copy-'))
      rmSync(join(home, entry), { recursive: true, force: true });
  }
  const staging = `${dir}.copy-${process.pid}`;
  rmSync(staging, { recursive: true, force: true });
  cpSync(nativeDir, staging, { recursive: true, verbatimSymlinks: true });
  makeReadableByAll(staging);
  try {
    renameSync(staging, dir);
  } catch (err) {
    rmSync(staging, { recursive: true, force: true });
    if (!existsSync(binaries.postgres)) throw err; // else a concurrent run made the same copy first
  }
  return binaries;
}

/** chmod a+rX over a tree (directories 755, executables 755, other files 644); symlinks untouched. */
function makeReadableByAll(path: string): void {
  const stats = lstatSync(path);
  if (stats.isSymbolicLink()) return;
  if (stats.isDirectory()) {
    chmodSync(path, 0o755);
    for (const entry of readdirSync(path)) makeReadableByAll(join(path, entry));
  } else {
    chmodSync(path, stats.mode & 0o100 ? 0o755 : 0o644);
  }
}

/** Fails, naming the cause and the fixes, unless `user` can run `postgres` from the home. */
function assertRunnable(postgres: string, home: string, user: PostgresUser): void {
  try {
    execFileSync(postgres, ['--version'], { uid: user.uid, gid: user.gid, cwd: home, stdio: 'pipe' });
  } catch (err) {
    const detail = (err as { stderr?: Buffer }).stderr?.toString().trim() || (err as Error).message;
    throw new Error(
      `Running as root, so Postgres runs as user '${user.name}' (Postgres refuses to run as root), ` +
        `but that user cannot run ${postgres}: ${detail}\n` +
        `Every directory above ${home} must be searchable by others (chmod o+x). ` +
        'Or set DATABASE_URL to a Postgres server of your own, or run as an ordinary user.',
    );
  }
}

/**
 * The real data directory for the cluster at `dataDir` in the checkout, making `dataDir` a
 * symlink to `<home>/<name>-<hash of dataDir>`. Without that symlink (a first run, or `.data/`
 * was deleted) anything left at the target is stale and is removed. A cluster directory made in
 * the checkout itself (by a version before this one) is used where it is.
 */
function placeCluster(dataDir: string, home: string): string {
  const target = join(home, `${basename(dataDir)}-${shortHash(resolve(dataDir), 8)}`);
  const entry = lstatOrUndefined(dataDir);
  if (entry?.isDirectory()) {
    if (existsSync(join(dataDir, 'PG_VERSION'))) return dataDir;
    throw new Error(`${dataDir} exists but is not a Postgres data directory; remove it and retry.`);
  }
  if (entry?.isSymbolicLink() && readlinkSync(dataDir) === target) return target;
  rmSync(target, { recursive: true, force: true });
  rmSync(dataDir, { force: true });
  mkdirSync(dirname(dataDir), { recursive: true });
  symlinkSync(target, dataDir);
  return target;
}

function shortHash(text: string, length: number): string {
  return createHash('sha256').update(text).digest('hex').slice(0, length);
}

function isDirectory(path: string): boolean {
  try {
    return statSync(path).isDirectory();
  } catch {
    return false;
  }
}

function lstatOrUndefined(path: string): Stats | undefined {
  try {
    return lstatSync(path);
  } catch {
    return undefined;
  }
}

function readdirOrEmpty(dir: string): string[] {
  try {
    return readdirSync(dir);
  } catch {
    return [];
  }
}

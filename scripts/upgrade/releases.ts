import { spawnSync } from 'node:child_process';
import { cpSync, existsSync, mkdirSync, readFileSync, rmSync, symlinkSync } from 'node:fs';
import { delimiter, dirname, join } from 'node:path';
import semver from 'semver';
import { repoRoot } from '../processes';

/** One line of `releases.tsv`: a version and the commit it is. */
export interface Release {
  version: string;
  commit: string;
  date: string;
}

/** A tree of the service's code that processes can run from: a release's checkout, or the working tree. */
export interface ReleaseTree {
  /** How the bench names it: `0.1.0`, `working tree`, `working tree + fixture`. */
  label: string;
  /** package.json's version there. */
  version: string;
  /** The worker build id its processes declare (TEMPORAL_BUILD_ID). */
  buildId: string;
  dir: string;
  /** The node binary its processes run on: the runtime that release ships with (releaseRuntime). */
  node: string;
}

/** The fixture release's change: a workflow patch, an expand and a contract migration. */
export const FIXTURE_PATCH = join('scripts', 'upgrade', 'fixture-release.patch');
/** Where checked-out releases are kept between runs (git-ignored). */
const RELEASES_DIR = join(repoRoot, '.data', 'releases');

/** The releases recorded in `releases.tsv`, oldest first. */
export function readReleases(file = join(repoRoot, 'releases.tsv')): Release[] {
  const rows = readFileSync(file, 'utf8')
    .split('\n')
    .filter((line) => line.trim() && !line.startsWith('#'))
    .map((line) => line.split('\t'));
  const [header, ...lines] = rows;
  if (header?.join(',') !== 'version,commit,date') throw new Error(`${file}: the header must be version, commit, date`);
  return lines.map(([version, commit, date], i) => {
    if (!semver.valid(version) || !/^[0-9a-f]{40}$/.test(commit ?? '') || !/^\d{4}-\d{2}-\d{2}$/.test(date ?? ''))
      throw new Error(`${file}, release ${i + 1}: expected a semver version, a 40-digit commit and a date`);
    return { version, commit, date };
  });
}

/** package.json's version in `dir`. */
export function packageVersion(dir = repoRoot): string {
  return (JSON.parse(readFileSync(join(dir, 'package.json'), 'utf8')) as { version: string }).version;
}

/** The newest recorded release whose version is lower than `version`: the one a deploy of `version` replaces. */
export function previousRelease(version: string, releases = readReleases()): Release | undefined {
  return releases.filter((r) => semver.lt(r.version, version)).sort((a, b) => semver.rcompare(a.version, b.version))[0];
}

/** Runs git (or another command) in `cwd`, throwing with its output when it fails. */
function run(command: string, args: string[], cwd: string, env: NodeJS.ProcessEnv = process.env): string {
  const result = spawnSync(command, args, { cwd, env, encoding: 'utf8', stdio: ['ignore', 'pipe', 'pipe'] });
  if (result.status !== 0)
    throw new Error(`${command} ${args.join(' ')} failed (${result.status}): ${result.stderr || result.stdout}`);
  return result.stdout.trim();
}

/**
 * A checkout of `release` in `.data/releases/<version>` (a detached git worktree) with its own
 * dependencies installed by `npm ci` from its lockfile; reused by later runs when it is intact.
 */
export function checkoutRelease(release: Release, log: (line: string) => void): ReleaseTree {
  const dir = join(RELEASES_DIR, release.version);
  const tree = () => {
    const node = releaseRuntime(dir, log);
    log(`Release ${release.version} runs on Node ${nodeVersion(node)} (${node}).`);
    return { label: release.version, version: release.version, buildId: release.version, dir, node };
  };
  const intact =
    existsSync(join(dir, 'node_modules', '.package-lock.json')) &&
    spawnSync('git', ['rev-parse', 'HEAD'], { cwd: dir, encoding: 'utf8' }).stdout?.trim() === release.commit;
  if (intact) return tree();
  log(`Checking out release ${release.version} (${release.commit.slice(0, 10)}) into ${dir}...`);
  ensureCommit(release, log);
  run('git', ['worktree', 'prune'], repoRoot);
  if (existsSync(dir)) {
    spawnSync('git', ['worktree', 'remove', '--force', dir], { cwd: repoRoot });
    rmSync(dir, { recursive: true, force: true });
  }
  mkdirSync(RELEASES_DIR, { recursive: true });
  run('git', ['worktree', 'add', '--detach', dir, release.commit], repoRoot);
  const released = tree();
  log(`Installing release ${release.version}'s dependencies (npm ci) with Node ${nodeVersion(released.node)}...`);
  const env = { ...process.env, PATH: [dirname(released.node), process.env.PATH].join(delimiter) };
  run('npm', ['ci', '--no-audit', '--no-fund', '--loglevel=error'], dir, env);
  return released;
}

/** What `node --version` prints. */
function nodeVersion(node: string): string {
  return spawnSync(node, ['--version'], { encoding: 'utf8' }).stdout?.trim() || 'unknown';
}

/**
 * The node a release tree runs on, as production ran it: a release that pins its runtime (.nvmrc)
 * gets it from its own bootstrap (installed into its .tools/ when missing); an older one (0.1.0,
 * 0.2.0) ran on its Dockerfile's `node:<major>` image, so it gets the first node of that major on
 * PATH outside this checkout's .tools/ (a machine's Node 20), or, when there is none, this process's
 * node, said in the log.
 */
export function releaseRuntime(dir: string, log: (line: string) => void): string {
  if (existsSync(join(dir, '.nvmrc'))) {
    const result = spawnSync(process.execPath, [join(dir, 'scripts', 'bootstrap.js'), 'node-path'], {
      cwd: dir,
      encoding: 'utf8',
      stdio: ['ignore', 'pipe', 'inherit'],
    });
    if (result.status !== 0) throw new Error(`${dir}: its bootstrap could not provide its pinned Node`);
    return result.stdout.trim();
  }
  const major = /^FROM node:(\d+)/m.exec(readFileSync(join(dir, 'Dockerfile'), 'utf8'))?.[1];
  const tools = join(repoRoot, '.tools');
  const found = (process.env.PATH ?? '')
    .split(delimiter)
    .filter((d) => d && d !== tools && !d.startsWith(`${tools}/`))
    .map((d) => join(d, 'node'))
    .find((node) => existsSync(node) && nodeVersion(node).startsWith(`v${major}.`));
  if (found) return found;
  log(`${dir} ran on Node ${major ?? '?'} (its Dockerfile), which this machine lacks: it runs on ${process.version}.`);
  return process.execPath;
}

/** Fetches `release`'s commit when this clone lacks it (a shallow clone), or says why it cannot be had. */
function ensureCommit(release: Release, log: (line: string) => void): void {
  const present = () =>
    spawnSync('git', ['cat-file', '-e', `${release.commit}^{commit}`], { cwd: repoRoot }).status === 0;
  if (present()) return;
  log(`This clone lacks ${release.commit.slice(0, 10)} (a shallow clone?): fetching it from origin...`);
  for (const args of [
    ['fetch', '--no-tags', 'origin', release.commit],
    ['fetch', '--no-tags', '--unshallow', 'origin'],
  ]) {
    spawnSync('git', args, { cwd: repoRoot, stdio: 'ignore' });
    if (present()) return;
  }
  throw new Error(
    `release ${release.version}'s commit ${release.commit} is not in this clone and origin did not give it: ` +
      'clone with history (not --depth 1) to upgrade from it',
  );
}

/** The working tree this script runs from, as the release it will become. */
export function workingTree(): ReleaseTree {
  const version = packageVersion();
  return { label: 'working tree', version, buildId: version, dir: repoRoot, node: process.execPath };
}

/**
 * `base` plus the fixture release (`scripts/upgrade/fixture-release.patch`: a workflow patch, an
 * expand and a contract migration), in `.data/releases/fixture`: a copy of the working tree's files
 * (tracked and untracked, not ignored) sharing its node_modules, with the patch applied. Its build id
 * is the working tree's version with `-fixture` appended.
 */
export function fixtureTree(base: ReleaseTree, log: (line: string) => void): ReleaseTree {
  const dir = join(RELEASES_DIR, 'fixture');
  log(`Building the fixture release in ${dir} (the working tree plus scripts/upgrade/fixture-release.patch)...`);
  rmSync(dir, { recursive: true, force: true });
  mkdirSync(dir, { recursive: true });
  const files = run('git', ['ls-files', '--cached', '--others', '--exclude-standard', '-z'], base.dir)
    .split('\0')
    .filter((f) => f && existsSync(join(base.dir, f)));
  for (const file of files) cpSync(join(base.dir, file), join(dir, file), { recursive: true });
  symlinkSync(join(base.dir, 'node_modules'), join(dir, 'node_modules'));
  // Outside any repository: inside one (this checkout), git apply would skip every path above `dir`.
  const patched = spawnSync('git', ['apply', '--whitespace=nowarn', join(base.dir, FIXTURE_PATCH)], {
    cwd: dir,
    encoding: 'utf8',
    env: { ...process.env, GIT_CEILING_DIRECTORIES: RELEASES_DIR },
  });
  if (patched.status !== 0) throw new Error(`${FIXTURE_PATCH} does not apply: ${patched.stderr}`);
  if (spawnSync('git', ['diff', '--no-index', '--quiet', base.dir + '/migrations', dir + '/migrations']).status === 0)
    throw new Error(`${FIXTURE_PATCH} applied, but the fixture's migrations are the working tree's`);
  return {
    label: `${base.label} + fixture`,
    version: base.version,
    buildId: `${base.version}-fixture`,
    dir,
    node: base.node,
  };
}

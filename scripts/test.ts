import { spawnSync } from 'node:child_process';
import { readFileSync, rmSync } from 'node:fs';
import { join } from 'node:path';
import { startEmbeddedPg, type EmbeddedPg } from './embedded-pg';
import { removeCluster, removeLeftoversOfDeadProcesses } from './postgres-home';
import { freePort, repoRoot, startChild, stopAll, type Child } from './processes';
import { ensureSystemPackages, packagesFor, SystemPackageMissing } from './system-packages';
import { findTemporalCli, findTestServer } from './toolchain';

/**
 * `npm test`: first installs the system packages the selected jest files need (Chromium for the
 * browser tests, Prometheus for the telemetry tests: scripts/system-packages.ts), then runs the
 * checks below in order, all of them, against embedded Postgres unless DATABASE_URL is set. Extra
 * arguments go to jest (`npm test -- test/unit`). Exits 0 when every check passes, else with the
 * exit code of the last check that failed (jest's, when it fails); 1 at once when a needed
 * system package is missing and cannot be installed. `TEST_CHECKS=jest` (comma-separated names)
 * runs only the checks named: for scripts that run tests for what they produce (screenshots).
 */

interface Check {
  name: string;
  /** An executable in node_modules/.bin. */
  bin: string;
  args: string[];
  /** A closing line for CI logs, such as `jest: 90 passed, 1 failed, 0 skipped`. */
  summary?: () => string | undefined;
}

/**
 * The checks, in order: the lockfile, types, lint, formatting, the relative links of the Markdown
 * documents, the replay of committed workflow histories, the lint of the migrations since the last
 * release, then the jest suites.
 */
function checks(jestArgs: string[]): Check[] {
  const jestResults = join(repoRoot, '.data', `jest-results-${process.pid}.json`);
  return [
    { name: 'lockfile', bin: 'tsx', args: [join('scripts', 'check-lockfile.ts')] },
    { name: 'typecheck', bin: 'tsc', args: ['--noEmit', '-p', '.'] },
    { name: 'lint', bin: 'eslint', args: ['--max-warnings', '0', '.'] },
    { name: 'format', bin: 'prettier', args: ['--check', '--log-level', 'warn', '.'] },
    { name: 'links', bin: 'tsx', args: [join('scripts', 'check-links.ts')] },
    { name: 'replay', bin: 'tsx', args: [join('scripts', 'replay.ts')] },
    { name: 'migrations', bin: 'tsx', args: [join('scripts', 'check-migrations.ts')] },
    {
      name: 'jest',
      bin: 'jest',
      args: [...jestArgs, '--json', `--outputFile=${jestResults}`],
      summary: () => jestSummary(jestResults),
    },
  ];
}

/** `jest: N passed, N failed, N skipped` from jest's JSON results (deleted after reading). */
function jestSummary(resultsFile: string): string | undefined {
  try {
    const r = JSON.parse(readFileSync(resultsFile, 'utf8')) as Record<string, number>;
    return `jest: ${r.numPassedTests} passed, ${r.numFailedTests} failed, ${r.numPendingTests + r.numTodoTests} skipped`;
  } catch {
    return undefined;
  } finally {
    rmSync(resultsFile, { force: true });
  }
}

const PG_TIMEOUT_MS = 120_000;

/** The test files jest would run with these arguments (`jest --listTests`). */
function selectedTestFiles(jestArgs: string[]): string[] {
  const result = spawnSync(join(repoRoot, 'node_modules', '.bin', 'jest'), [...jestArgs, '--listTests'], {
    cwd: repoRoot,
    encoding: 'utf8',
    stdio: ['ignore', 'pipe', 'inherit'],
  });
  if (result.status !== 0) throw new Error(`jest --listTests failed (exit ${result.status})`);
  return result.stdout.split('\n').filter(Boolean);
}

/** Installs what the selected tests need from Debian; on failure prints why and the command to run, and returns false. */
function systemPackagesReady(jestArgs: string[]): boolean {
  try {
    ensureSystemPackages(packagesFor(selectedTestFiles(jestArgs)));
    return true;
  } catch (err) {
    if (!(err instanceof SystemPackageMissing)) throw err;
    process.stderr.write(`\n${err.message}\n`);
    return false;
  }
}

let interrupted = false;
let running: Child | undefined;

/** Forwards a stop request to the running check and skips the rest. */
function interrupt(signal: NodeJS.Signals): void {
  interrupted = true;
  running?.signal(signal);
}

/** Runs one check with inherited output (same process group, so a terminal Ctrl-C reaches it) and returns its exit code. */
async function runCheck(check: Check, env: NodeJS.ProcessEnv): Promise<number> {
  process.stdout.write(`\n=== ${check.name}: ${[check.bin, ...check.args].join(' ')}\n`);
  const started = Date.now();
  running = startChild(check.name, join(repoRoot, 'node_modules', '.bin', check.bin), check.args, {
    cwd: repoRoot,
    env,
    stdio: 'inherit',
    detached: false,
  });
  const info = await running.exited;
  running = undefined;
  const code = info.code ?? 1;
  const seconds = ((Date.now() - started) / 1000).toFixed(1);
  process.stdout.write(`=== ${check.name}: ${code === 0 ? 'passed' : `failed (exit ${code})`} in ${seconds}s\n`);
  return code;
}

/** Starts a throwaway Postgres for this run in .data/test-pg-<pid>, first removing those of runs that were killed. */
async function startTestPostgres(): Promise<{ pg: EmbeddedPg; dataDir: string }> {
  const dataRoot = join(repoRoot, '.data');
  removeLeftoversOfDeadProcesses(dataRoot);
  const dataDir = join(dataRoot, `test-pg-${process.pid}`);
  try {
    const pg = await startEmbeddedPg({
      dataDir,
      port: await freePort(),
      durable: false,
      timeoutMs: PG_TIMEOUT_MS,
      // A run on a cluster of its own (npm run test:cluster): its six processes' pools (90) beside the tests'.
      maxConnections: process.env.TEMPORAL_MODE === 'cluster' ? 300 : undefined,
    });
    return { pg, dataDir };
  } catch (err) {
    await stopAll();
    removeCluster(dataDir);
    throw err;
  }
}

/** Stops the throwaway Postgres and deletes its data and log. */
async function removeTestPostgres(testPg: { pg: EmbeddedPg; dataDir: string }): Promise<void> {
  await testPg.pg.stop();
  removeCluster(testPg.dataDir);
}

async function main(): Promise<number> {
  process.on('SIGINT', () => interrupt('SIGINT'));
  process.on('SIGTERM', () => interrupt('SIGTERM'));
  const args = process.argv.slice(2);
  const jestOnly = args[0] === '--jest-only';
  const jestArgs = jestOnly ? args.slice(1) : args;
  if (!systemPackagesReady(jestArgs)) return 1;
  const env: NodeJS.ProcessEnv = {
    ...process.env,
    TEMPORAL_TEST_SERVER_PATH: findTestServer(),
    TEMPORAL_CLI_PATH: findTemporalCli(),
  };
  const testPg = env.DATABASE_URL ? undefined : await startTestPostgres();
  if (testPg) env.DATABASE_URL = testPg.pg.url('postgres');
  const summaries: string[] = [];
  let exitCode = 0;
  try {
    const only = process.env.TEST_CHECKS?.split(',').map((name) => name.trim());
    for (const check of checks(jestArgs).filter((c) => !only || only.includes(c.name))) {
      if (interrupted) break;
      const code = await runCheck(check, env);
      if (code !== 0) exitCode = code;
      const summary = check.summary?.();
      if (summary) summaries.push(summary);
    }
  } finally {
    if (testPg) await removeTestPostgres(testPg);
  }
  process.stdout.write(summaries.map((line) => `${line}\n`).join(''));
  return interrupted ? 130 : exitCode;
}

main().then(
  (code) => process.exit(code),
  (err: unknown) => {
    process.stderr.write(`npm test failed: ${err instanceof Error ? err.message : String(err)}\n`);
    process.exit(1);
  },
);

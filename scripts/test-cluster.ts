import { spawn } from 'node:child_process';
import { join } from 'node:path';
import { findBuild, ensureServerBuilt } from './cluster/build';
import { machineBuildDir, TEMPORAL_SERVER_VERSION } from './cluster/settings';
import { CLUSTER_SUITES } from './cluster/suites';
import { repoRoot } from './processes';

/**
 * `npm run test:cluster`: the integration suites that use a real Temporal server
 * (scripts/cluster/suites.ts) on a self-hosted cluster, `TEMPORAL_MODE=cluster`: the checkout's
 * `npm run cluster` when it runs, else one of the run's own, stopped and dropped at its end. Runs
 * jest alone (the quick checks are `npm test`'s); extra arguments go to jest.
 *
 *   npm run test:cluster          build when needed (a cold build takes half an hour on 2 cores), then the suites
 *   npm run test:cluster -- --ci  CI's step (.ci/run): with no build in the checkout or the machine's
 *                                 cache, builds only when CI's time budget allows, else prints why it
 *                                 skips and exits 0
 *
 * The budget: CI_STARTED_AT (epoch seconds, set by .ci/run) plus CI_BUDGET_MINUTES (75: CI must
 * finish within 90) must leave COLD_BUILD_MINUTES and SUITES_MINUTES, measured on this machine.
 */

/**
 * A cold `go install` of the release, modules downloaded (docs/cluster.md, "Figures": 36 and 70
 * minutes measured on this 2-core machine shared with other builds): the larger.
 */
const COLD_BUILD_MINUTES = 70;
/** The suites on the cluster, the run's own cluster's start and stop included. */
const SUITES_MINUTES = 12;

const say = (line: string) => process.stdout.write(`${line}\n`);

async function main(): Promise<number> {
  const args = process.argv.slice(2);
  const ci = args.includes('--ci');
  const jestArgs = args.filter((a) => a !== '--ci');
  const started = Date.now();
  const build = findBuild();
  if (ci && build === null) {
    const startedAt = Number(process.env.CI_STARTED_AT);
    const budget = Number(process.env.CI_BUDGET_MINUTES ?? 75);
    const elapsed = startedAt ? (Date.now() / 1000 - startedAt) / 60 : 0;
    const needed = elapsed + COLD_BUILD_MINUTES + SUITES_MINUTES;
    if (needed > budget) {
      say(
        `test:cluster: skipped: no build of Temporal server ${TEMPORAL_SERVER_VERSION} is cached (not in .tools/ nor ` +
          `${machineBuildDir()}), and CI at ${elapsed.toFixed(0)} min + a cold build (${COLD_BUILD_MINUTES} min) + ` +
          `the suites (${SUITES_MINUTES} min) = ${needed.toFixed(0)} min would pass its ${budget}-minute budget. ` +
          '`npm run cluster` once on this machine fills the cache.',
      );
      return 0;
    }
    say(
      `test:cluster: no cached build; CI at ${elapsed.toFixed(0)} min leaves room for a cold build (budget ${budget} min).`,
    );
  }
  const buildSeconds = await ensureServerBuilt(say);
  say(
    buildSeconds
      ? `test:cluster: built Temporal server ${TEMPORAL_SERVER_VERSION} in ${buildSeconds} s`
      : `test:cluster: Temporal server ${TEMPORAL_SERVER_VERSION}, build reused (${build ?? 'checkout'})`,
  );
  const code = await new Promise<number>((resolveCode) => {
    const child = spawn(
      process.execPath,
      [join(repoRoot, 'scripts', 'bootstrap.js'), 'test', ...CLUSTER_SUITES, ...jestArgs],
      { cwd: repoRoot, env: { ...process.env, TEMPORAL_MODE: 'cluster', TEST_CHECKS: 'jest' }, stdio: 'inherit' },
    );
    for (const signal of ['SIGINT', 'SIGTERM'] as const) process.on(signal, () => child.kill(signal));
    child.once('exit', (exitCode, signal) => resolveCode(exitCode ?? (signal ? 1 : 0)));
  });
  say(
    `test:cluster: ${code === 0 ? 'passed' : `FAILED (exit ${code})`}: ${CLUSTER_SUITES.length} suites on the cluster in ${Math.round((Date.now() - started) / 1000)} s`,
  );
  return code;
}

main().then(
  (code) => process.exit(code),
  (err: unknown) => {
    process.stderr.write(`npm run test:cluster failed: ${err instanceof Error ? err.message : String(err)}\n`);
    process.exit(1);
  },
);

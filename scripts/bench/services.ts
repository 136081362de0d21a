import { closeSync, mkdtempSync, openSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { randomString } from '../../src/lib/ids';
import { type Child, freePort, repoRoot, SERVICE_NODE_FLAGS, startChild, waitFor } from '../processes';
import type { BenchEnvironment } from './environment';
import { benchMetricsPorts } from './metrics-ports';

/**
 * A child process running `entry` (a TypeScript file under the repository, such as
 * `src/main/worker.ts`) with `env` and `args` (and Node's own `nodeArgs`, such as `--cpu-prof`), its
 * output appended to `logFile`: the benchmarks' services run as production runs them, each in a
 * process of its own.
 */
export function startTsChild(
  name: string,
  entry: string,
  env: NodeJS.ProcessEnv,
  logFile: string,
  args: readonly string[] = [],
  nodeArgs: readonly string[] = [],
): Child {
  const out = openSync(logFile, 'a');
  const child = startChild(
    name,
    process.execPath,
    [...SERVICE_NODE_FLAGS, ...nodeArgs, '--import', 'tsx', entry, ...args],
    { cwd: repoRoot, env, stdio: ['ignore', out, out] },
    { logFile },
  );
  closeSync(out);
  return child;
}

/**
 * What a benchmark's worker and API share: the bench's Postgres and Temporal (`namespace`, a task
 * queue of their own), the API on a free loopback port at `baseUrl`, metrics on free ports,
 * warnings only in the logs; the benchmark adds its own settings.
 */
export async function benchServiceEnv(
  bench: BenchEnvironment,
  name: string,
  namespace: string,
): Promise<{ baseUrl: string; serviceEnv: NodeJS.ProcessEnv }> {
  const apiPort = await freePort();
  const baseUrl = `http://127.0.0.1:${apiPort}`;
  const serviceEnv: NodeJS.ProcessEnv = {
    PATH: process.env.PATH,
    HOME: process.env.HOME,
    DATABASE_URL: bench.databaseUrl,
    TEMPORAL_ADDRESS: bench.temporalAddress,
    TEMPORAL_NAMESPACE: namespace,
    TEMPORAL_TASK_QUEUE: `bench-${name}-${randomString(6)}`,
    HOST: '127.0.0.1',
    PORT: String(apiPort),
    PUBLIC_BASE_URL: baseUrl,
    ...(await benchMetricsPorts()),
    LOG_LEVEL: 'warn',
  };
  return { baseUrl, serviceEnv };
}

/**
 * The worker and the API (`src/main/worker.ts`, `src/main/api.ts`, as `npm run worker` and `npm run
 * api` start them) as child processes with `env`, their logs in a temporary folder removed with
 * `bench`; resolves once the API answers its health check at `baseUrl`.
 */
export async function startWorkerAndApi(
  bench: BenchEnvironment,
  name: string,
  env: NodeJS.ProcessEnv,
  baseUrl: string,
  log: (line: string) => void,
): Promise<{ worker: Child; api: Child }> {
  const logs = mkdtempSync(join(tmpdir(), `svc-bench-${name}-logs-`));
  bench.onClose(async () => rmSync(logs, { recursive: true, force: true }));
  log(`Starting the worker and the API as child processes (logs in ${logs})...`);
  // BENCH_CPU_PROF_DIR: each writes V8 CPU profiles there when it exits (`scripts/bench/cpu-profile.ts --whole` reads them).
  const profDir = process.env.BENCH_CPU_PROF_DIR;
  // BENCH_NODE_ARGS: more of Node's own flags for both (a GC setting to compare, `--trace-gc`).
  const nodeArgs = (process.env.BENCH_NODE_ARGS ?? '').split(' ').filter(Boolean);
  const nodeArgsOf = (who: string) => [
    ...nodeArgs,
    ...(profDir ? ['--cpu-prof', `--cpu-prof-dir=${join(profDir, `${name}-${who}`)}`] : []),
  ];
  const worker = startTsChild('worker', 'src/main/worker.ts', env, join(logs, 'worker.log'), [], nodeArgsOf('worker'));
  const api = startTsChild('API', 'src/main/api.ts', env, join(logs, 'api.log'), [], nodeArgsOf('api'));
  await waitFor(
    `the API at ${baseUrl}`,
    async () => (await fetch(`${baseUrl}/partner/v1/health`, { signal: AbortSignal.timeout(2000) })).status === 200,
    { timeoutMs: 120_000, watched: [api, worker] },
  );
  return { worker, api };
}

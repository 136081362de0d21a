import { closeSync, openSync } from 'node:fs';
import { type Child, repoRoot, startChild } from '../processes';

/**
 * A child process running `entry` (a TypeScript file under the repository, such as
 * `src/main/worker.ts`) with `env` and `args`, its output appended to `logFile`: the benchmarks'
 * services run as production runs them, each in a process of its own.
 */
export function startTsChild(
  name: string,
  entry: string,
  env: NodeJS.ProcessEnv,
  logFile: string,
  args: readonly string[] = [],
): Child {
  const out = openSync(logFile, 'a');
  const child = startChild(
    name,
    process.execPath,
    ['--import', 'tsx', entry, ...args],
    { cwd: repoRoot, env, stdio: ['ignore', out, out] },
    { logFile },
  );
  closeSync(out);
  return child;
}

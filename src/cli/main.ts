import { loadSettings, requireDatabaseUrl } from '../config';
import type { Client } from '@temporalio/client';
import { dbDeadlinesOf } from '../db/deadlines';
import { createDb } from '../db/knex';
import { connectTemporal } from '../temporal/client';
import type { CliDeps } from './command';
import { CliResult, renderError } from './render';
import { run } from './run';

function emit(result: CliResult): number {
  process.stdout.write(result.stdout);
  process.stderr.write(result.stderr);
  return result.exitCode;
}

/** `npm run -s ops -- <group> <command> [flags] [--json]`: the operator CLI (see OPS_CLI.md). */
async function main(argv: string[]): Promise<number> {
  let deps: CliDeps;
  let temporal: Promise<Client> | undefined;
  try {
    const settings = loadSettings();
    const connect = () => (temporal ??= connectTemporal(settings));
    deps = { settings, db: createDb(requireDatabaseUrl(settings), 2, dbDeadlinesOf(settings)), temporal: connect };
  } catch (err) {
    return emit(renderError('invalid_settings', (err as Error).message, argv.includes('--json')));
  }
  try {
    return emit(await run(argv, deps));
  } finally {
    await deps.db.destroy();
    if (temporal) await (await temporal.catch(() => undefined))?.connection.close();
  }
}

main(process.argv.slice(2)).then(
  (code) => {
    process.exitCode = code;
  },
  (err: unknown) => {
    process.stderr.write(`${err instanceof Error ? err.stack : String(err)}\n`);
    process.exitCode = 1;
  },
);

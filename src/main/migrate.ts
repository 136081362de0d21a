import { parseArgs } from 'node:util';
import type { Phase } from '../../migrations';
import { loadSettings, requireDatabaseUrl } from '../config';
import { dbDeadlinesOf } from '../db/deadlines';
import { createDb, type Db } from '../db/knex';
import { migrate, MigrationError, migrationStatus, unlockMigrations, type AppliedMigration } from '../db/migrator';
import { errorCause, log } from '../lib/log';

const USAGE = `usage: npm run -s migrate -- [--phase expand|contract] [--json]
       npm run -s migrate -- --status [--json]
       npm run -s migrate -- --unlock

  (no flags)        every pending migration, in order (a new install, development, tests)
  --phase expand    the pending expand migrations: run while the previous release still serves
  --phase contract  the pending contract migrations: run once no process of the previous release is left
  --status          every migration with its phase, applied or pending
  --unlock          frees knex's migration lock, left taken by a run killed mid-migration
  --json            one JSON document on stdout instead of lines`;

/** What `npm run migrate` was asked to do. */
interface Command {
  action: 'apply' | 'status' | 'unlock';
  phase?: Phase;
  json: boolean;
}

/** The command from the arguments, or a usage error. */
function parseCommand(args: string[]): Command | { usage: string } {
  let values;
  try {
    ({ values } = parseArgs({
      args,
      options: {
        phase: { type: 'string' },
        status: { type: 'boolean', default: false },
        unlock: { type: 'boolean', default: false },
        json: { type: 'boolean', default: false },
      },
      strict: true,
    }));
  } catch (err) {
    return { usage: err instanceof Error ? err.message : String(err) };
  }
  if (values.phase !== undefined && values.phase !== 'expand' && values.phase !== 'contract') {
    return { usage: `--phase is expand or contract, not ${values.phase}` };
  }
  if ([values.status, values.unlock, values.phase !== undefined].filter(Boolean).length > 1) {
    return { usage: '--phase, --status and --unlock go alone' };
  }
  const action = values.status ? 'status' : values.unlock ? 'unlock' : 'apply';
  return { action, phase: values.phase as Phase | undefined, json: values.json };
}

const out = (text: string) => process.stdout.write(`${text}\n`);
const line = (m: AppliedMigration) =>
  `applied ${m.name} (${m.phase}) in ${m.duration_ms} ms, ${m.attempts} attempt${m.attempts === 1 ? '' : 's'}`;

/** Applies the pending migrations of the phase (or all); prints what it did; returns the exit code. */
async function apply(db: Db, command: Command): Promise<number> {
  let applied: AppliedMigration[] = [];
  let failure: MigrationError | undefined;
  try {
    applied = await migrate(db, { phase: command.phase });
  } catch (err) {
    if (!(err instanceof MigrationError)) throw err;
    failure = err;
    applied = err.applied;
  }
  const pending = (await migrationStatus(db)).migrations
    .filter((m) => m.applied_at === null)
    .map(({ name, phase }) => ({ name, phase }));
  if (failure) log.error('migration failed', { error: failure.cause ?? failure, ...failure.failed });
  if (command.json) {
    const error = failure && {
      message: failure.message,
      ...failure.failed,
      ...(failure.cause ? { cause: errorCause(failure.cause) } : {}),
    };
    out(JSON.stringify({ phase: command.phase ?? 'all', applied, pending, ...(error ? { error } : {}) }));
  } else {
    for (const m of applied) out(line(m));
    if (applied.length === 0 && !failure) out(`nothing to apply${command.phase ? ` in phase ${command.phase}` : ''}`);
    for (const m of pending) out(`pending ${m.name} (${m.phase})`);
    if (failure) out(`error: ${failure.message}`);
  }
  return failure ? 1 : 0;
}

/** Prints every migration with its phase and state. */
async function status(db: Db, command: Command): Promise<number> {
  const { migrations, unknown } = await migrationStatus(db);
  if (command.json) {
    out(JSON.stringify({ migrations, unknown }));
    return 0;
  }
  for (const m of migrations) {
    out(`${m.name.padEnd(48)} ${m.phase.padEnd(9)} ${m.applied_at ? m.applied_at.toISOString() : 'pending'}`);
  }
  for (const m of unknown) {
    out(`${m.name.padEnd(48)} ${'?'.padEnd(9)} ${m.applied_at.toISOString()} (not in this release: a newer one's)`);
  }
  return 0;
}

/** `npm run migrate`: applies pending forward-only migrations (all, or one phase), or shows them. */
async function main(): Promise<number> {
  const command = parseCommand(process.argv.slice(2));
  if ('usage' in command) {
    process.stderr.write(`${command.usage}\n${USAGE}\n`);
    return 2;
  }
  const settings = loadSettings();
  const db = createDb(requireDatabaseUrl(settings), 2, dbDeadlinesOf(settings));
  try {
    if (command.action === 'status') return await status(db, command);
    if (command.action === 'unlock') {
      await unlockMigrations(db);
      out('migration lock freed');
      return 0;
    }
    return await apply(db, command);
  } finally {
    await db.destroy();
  }
}

main().then(
  (code) => process.exit(code),
  (err: unknown) => {
    log.error('migration failed', { error: err });
    process.exit(1);
  },
);

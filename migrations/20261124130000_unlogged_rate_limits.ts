import type { Knex } from 'knex';

/**
 * Rate-limit windows live for seconds and are counted on every authenticated request: an unlogged
 * table writes no WAL, so counting a hit costs no WAL flush at commit. A crash empties the table,
 * which only forgets the current windows' counts (each is a second to a few minutes long).
 */
/** Drops nothing (but SET UNLOGGED rewrites the table: not allowed today). */
export const phase = 'expand';

export async function up(knex: Knex): Promise<void> {
  await knex.raw('ALTER TABLE rate_limit_windows SET UNLOGGED');
}

/** Forward-only: there is no down migration. */
export async function down(): Promise<void> {
  throw new Error('migrations are forward-only');
}

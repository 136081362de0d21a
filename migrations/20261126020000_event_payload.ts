import type { Knex } from 'knex';

/**
 * Events keep their payload compressed (`payload`, bytea: src/checkout/event-payload.ts) instead of
 * as jsonb: a session object takes about 300 bytes instead of 1.3 KB, below the 2 KB at which
 * Postgres would compress a row itself. Older rows keep their `data_object` and are read as they
 * are, so `data_object` may now be null. Both changes are catalog-only on every day (no row is
 * read or rewritten): the ACCESS EXCLUSIVE lock lasts milliseconds, and waits at most 5 s for a
 * long reader before the migration fails (to run again).
 */
export const config = { transaction: false };

/** Adds a nullable column and relaxes NOT NULL. */
export const phase = 'expand';

export async function up(knex: Knex): Promise<void> {
  await knex.transaction(async (trx) => {
    await trx.raw(`SET LOCAL lock_timeout = '5s'`);
    await trx.raw('ALTER TABLE events ADD COLUMN payload bytea');
    await trx.raw('ALTER TABLE events ALTER COLUMN data_object DROP NOT NULL');
  });
}

/** Forward-only: there is no down migration. */
export async function down(): Promise<void> {
  throw new Error('migrations are forward-only');
}

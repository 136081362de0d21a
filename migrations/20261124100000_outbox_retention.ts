import type { Knex } from 'knex';

/**
 * Outbox retention (OTP codes are secrets): `body` may be null, which is what the janitor leaves
 * of an SMS ten minutes after it was queued; every row goes after 30 days (index on created_at).
 * `test_mode` marks an SMS written for a test-mode session: it stays in the outbox, and the relay
 * never sends it (it is written without `next_attempt_at`, and the relay also skips the flag).
 */
/** Relaxes NOT NULL and adds a constant-default column and an index; drops nothing. */
export const phase = 'expand';

export async function up(knex: Knex): Promise<void> {
  await knex.schema.alterTable('outbox', (t) => {
    t.text('body').nullable().alter();
    t.boolean('test_mode').notNullable().defaultTo(false);
    t.index(['created_at'], 'outbox_created_at');
  });
}

/** Forward-only: there is no down migration. */
export async function down(): Promise<void> {
  throw new Error('migrations are forward-only');
}

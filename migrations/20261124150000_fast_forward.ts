import type { Knex } from 'knex';

/**
 * Test mode's fast-forward (`POST /v1/test_helpers/checkout/sessions/{id}/fast_forward`): how far a
 * payment attempt's clocks were moved while it was pending. Its deadlines (the amount rule's 30
 * seconds, the slow button's 90, the 24-hour timeout) count from `created_at` minus this, so the
 * recorded start stays true and the moved one is derived. Zero for every attempt not fast-forwarded.
 */
/** A constant-default column only. */
export const phase = 'expand';

export async function up(knex: Knex): Promise<void> {
  await knex.schema.alterTable('payment_attempts', (t) => {
    t.bigInteger('fast_forwarded_ms').notNullable().defaultTo(0);
  });
}

/** Forward-only: there is no down migration. */
export async function down(): Promise<void> {
  throw new Error('migrations are forward-only');
}

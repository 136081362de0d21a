import type { Knex } from 'knex';

/**
 * Indexes that let the scrape-time backlog gauges (src/telemetry/backlogs.ts) read one index entry
 * instead of walking the queues: the pending webhook row due first, and the oldest unsent outbox
 * message of each kind (by id, in commit order; its created_at is the age). Built CONCURRENTLY, as
 * both tables grow under load; each statement runs alone, outside a transaction.
 */
export const config = { transaction: false };

/** Indexes built CONCURRENTLY only. */
export const phase = 'expand';

export async function up(knex: Knex): Promise<void> {
  await knex.raw(
    `CREATE INDEX CONCURRENTLY IF NOT EXISTS webhook_queue_pending_due ON webhook_queue (next_attempt_at) WHERE status = 'pending'`,
  );
  await knex.raw(
    'CREATE INDEX CONCURRENTLY IF NOT EXISTS outbox_unsent ON outbox (kind, id) WHERE sent_at IS NULL AND next_attempt_at IS NOT NULL',
  );
}

/** Forward-only: there is no down migration. */
export async function down(): Promise<void> {
  throw new Error('migrations are forward-only');
}

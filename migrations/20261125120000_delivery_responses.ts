import type { Knex } from 'knex';

/**
 * What each attempt's endpoint answered, and the events that did not get through.
 * `event_deliveries.duration_ms` and `response_body` (the first 1 KB, sanitised): nullable columns
 * without a default, so adding them rewrites nothing and takes its lock for an instant.
 * `webhook_undelivered`: one row per event and endpoint whose latest attempt failed and that was
 * never delivered there, kept by the transaction that records attempts; it serves
 * `GET /v1/events?delivery_success=false` from its (merchant, mode, event time, event) index
 * however long the event log grows. It is new and empty, so its indexes need no CONCURRENTLY.
 */
export async function up(knex: Knex): Promise<void> {
  await knex.raw('ALTER TABLE event_deliveries ADD COLUMN duration_ms integer, ADD COLUMN response_body text');
  await knex.raw(`
    CREATE TABLE webhook_undelivered (
      endpoint_id text NOT NULL,
      event_id text NOT NULL REFERENCES events (id) ON DELETE CASCADE,
      merchant_id text NOT NULL,
      mode text NOT NULL,
      event_created_at timestamptz(3) NOT NULL,
      PRIMARY KEY (endpoint_id, event_id)
    )`);
  await knex.raw(
    `CREATE INDEX webhook_undelivered_list ON webhook_undelivered (merchant_id, mode, event_created_at, event_id)`,
  );
  // The cascade from the event log's purge finds an event's rows through this index.
  await knex.raw(`CREATE INDEX webhook_undelivered_event ON webhook_undelivered (event_id)`);
}

/** Forward-only: there is no down migration. */
export async function down(): Promise<void> {
  throw new Error('migrations are forward-only');
}

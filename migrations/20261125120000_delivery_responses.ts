import type { Knex } from 'knex';

/**
 * What each attempt's endpoint answered, and the events that did not get through.
 * `event_deliveries.duration_ms` and `response_body` (the first 1 KB, sanitised): nullable columns
 * without a default, so adding them rewrites nothing and takes its lock for an instant.
 * `webhook_undelivered`: one row per event and endpoint whose latest attempt failed and that was
 * never delivered there, kept by the transaction that records attempts; it serves
 * `GET /v1/events?delivery_success=false` from its (merchant, mode, event time, event) index
 * however long the event log grows. It is new and empty, so its indexes need no CONCURRENTLY.
 * No foreign key to `events`: the event log is partitioned by day
 * (20261125200000_partitioned_event_log), which leaves no unique id alone to point at, and a key
 * made now would follow the old table into `events_legacy` and keep it from ever being dropped.
 * The janitor deletes the rows of events past retention instead (by `event_created_at`).
 */
/** Nullable columns and a new table only. */
export const phase = 'expand';

export async function up(knex: Knex): Promise<void> {
  await knex.raw('ALTER TABLE event_deliveries ADD COLUMN duration_ms integer, ADD COLUMN response_body text');
  await knex.raw(`
    CREATE TABLE webhook_undelivered (
      endpoint_id text NOT NULL,
      event_id text NOT NULL,
      merchant_id text NOT NULL,
      mode text NOT NULL,
      event_created_at timestamptz(3) NOT NULL,
      PRIMARY KEY (endpoint_id, event_id)
    )`);
  await knex.raw(
    `CREATE INDEX webhook_undelivered_list ON webhook_undelivered (merchant_id, mode, event_created_at, event_id)`,
  );
  // `delivery_success=true` asks whether an event has a row here through this index.
  await knex.raw(`CREATE INDEX webhook_undelivered_event ON webhook_undelivered (event_id)`);
  // The janitor's purge of rows past retention reads the oldest through this index, in batches.
  await knex.raw(`CREATE INDEX webhook_undelivered_event_time ON webhook_undelivered (event_created_at)`);
}

/** Forward-only: there is no down migration. */
export async function down(): Promise<void> {
  throw new Error('migrations are forward-only');
}

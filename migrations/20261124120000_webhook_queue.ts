import type { Knex } from 'knex';

/**
 * Pending webhook deliveries in Postgres (the delivery workflow keeps none in its own state), the
 * per-endpoint concurrency setting, and the replays of a time window.
 */
/** Adds tables and a column; its CHECK covers only that new column, which no earlier release writes. */
export const phase = 'expand';

export async function up(knex: Knex): Promise<void> {
  // One row per (event, endpoint, generation), written by the dispatcher (generation 0), a
  // redelivery or a replay (a new generation each). `attempt_no` is the next attempt to make while
  // pending, the last one made afterwards. Rows go with their event's 30-day purge.
  await knex.schema.createTable('webhook_queue', (t) => {
    t.text('event_id').notNullable().references('events.id').onDelete('CASCADE');
    t.text('endpoint_id').notNullable();
    t.bigInteger('generation').notNullable();
    t.text('status').notNullable().defaultTo('pending').checkIn(['pending', 'delivered', 'failed', 'cancelled']);
    t.integer('attempt_no').notNullable().defaultTo(1);
    /** When the next attempt is due (workflow time); while claimed, when the claim lapses. Null once over. */
    t.timestamp('next_attempt_at', { useTz: true, precision: 3 });
    /** The delivery batch holding the row (its POST may be in flight); null otherwise. */
    t.text('claim');
    t.timestamp('created_at', { useTz: true, precision: 3 }).notNullable().defaultTo(knex.fn.now());
    t.timestamp('updated_at', { useTz: true, precision: 3 }).notNullable().defaultTo(knex.fn.now());
    t.primary(['event_id', 'endpoint_id', 'generation']);
  });
  await knex.raw(
    `CREATE INDEX webhook_queue_due ON webhook_queue (endpoint_id, next_attempt_at) WHERE status = 'pending'`,
  );
  await knex.raw(`CREATE INDEX webhook_queue_claim ON webhook_queue (claim) WHERE claim IS NOT NULL`);

  await knex.schema.alterTable('webhook_endpoints', (t) => {
    /** POSTs in flight to this endpoint at most (set with `ops webhook-endpoint set-concurrency`). */
    t.integer('max_in_flight').notNullable().defaultTo(20);
  });
  await knex.raw(
    'ALTER TABLE webhook_endpoints ADD CONSTRAINT webhook_endpoints_max_in_flight CHECK (max_in_flight BETWEEN 1 AND 200)',
  );

  // `POST /webhook_endpoints/{id}/replay`: one row per replay, so the same Idempotency-Key never
  // queues a window twice (even when the first answer was lost before it was stored).
  await knex.schema.createTable('webhook_replays', (t) => {
    t.text('id').primary();
    t.text('endpoint_id').notNullable();
    t.text('merchant_id').notNullable();
    t.text('mode').notNullable().checkIn(['test', 'live']);
    t.text('idempotency_key').notNullable();
    t.timestamp('since', { useTz: true, precision: 3 }).notNullable();
    t.timestamp('until', { useTz: true, precision: 3 }).notNullable();
    t.jsonb('types');
    t.bigInteger('generation').notNullable();
    t.integer('queued').notNullable();
    t.timestamp('created_at', { useTz: true, precision: 3 }).notNullable().defaultTo(knex.fn.now());
    t.unique(['endpoint_id', 'idempotency_key']);
  });
}

/** Forward-only: there is no down migration. */
export async function down(): Promise<void> {
  throw new Error('migrations are forward-only');
}

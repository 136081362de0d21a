import type { Knex } from 'knex';

/** Webhook endpoints, one row per delivery attempt, and the dispatch mark on events. */
/** Adds tables and nullable columns (and fills one: a backfill, not allowed today). */
export const phase = 'expand';

export async function up(knex: Knex): Promise<void> {
  await knex.schema.createTable('webhook_endpoints', (t) => {
    t.text('id').primary();
    t.text('merchant_id').notNullable().references('merchants.id');
    t.text('mode').notNullable().checkIn(['test', 'live']);
    t.text('url').notNullable();
    /** Event types, or `["*"]`. */
    t.jsonb('events').notNullable();
    t.text('status').notNullable().checkIn(['enabled', 'disabled']);
    t.text('disabled_reason');
    t.text('description');
    /** AES-256-GCM ciphertexts (WEBHOOK_SECRET_KEY); the row is deleted with the endpoint, secrets and all. */
    t.text('secret_ciphertext').notNullable();
    t.text('previous_secret_ciphertext');
    t.timestamp('previous_secret_expires_at', { useTz: true, precision: 3 });
    /** Start of the current run of failed deliveries (the 3-day disable clock), null while healthy. */
    t.timestamp('failing_since', { useTz: true, precision: 3 });
    t.timestamp('last_success_at', { useTz: true, precision: 3 });
    t.timestamp('created_at', { useTz: true, precision: 3 }).notNullable().defaultTo(knex.fn.now());
    t.timestamp('updated_at', { useTz: true, precision: 3 }).notNullable().defaultTo(knex.fn.now());
    t.index(['merchant_id', 'mode', 'status']);
  });

  // One row per attempt. endpoint_id has no foreign key: past attempts outlive a deleted endpoint.
  // Rows go with their event when the janitor purges it (30 days).
  await knex.schema.createTable('event_deliveries', (t) => {
    t.text('event_id').notNullable().references('events.id').onDelete('CASCADE');
    t.text('endpoint_id').notNullable();
    /** 0 for the first dispatch; each redelivery takes a new number from webhook_delivery_generations. */
    t.bigInteger('generation').notNullable();
    t.integer('attempt_no').notNullable();
    t.text('merchant_id').notNullable();
    t.text('mode').notNullable().checkIn(['test', 'live']);
    t.integer('status_code');
    t.text('error');
    t.timestamp('delivered_at', { useTz: true, precision: 3 });
    t.timestamp('next_retry_at', { useTz: true, precision: 3 });
    t.timestamp('created_at', { useTz: true, precision: 3 }).notNullable().defaultTo(knex.fn.now());
    t.primary(['event_id', 'endpoint_id', 'generation', 'attempt_no']);
  });
  await knex.raw('CREATE SEQUENCE webhook_delivery_generations START 1');

  await knex.schema.alterTable('events', (t) => {
    /** Set once every matching endpoint's workflow has the event; null rows are swept (crash safety). */
    t.timestamp('dispatched_at', { useTz: true, precision: 3 });
    /** Only for the synthetic event of `POST /webhook_endpoints/{id}/test`: the one endpoint it goes to. */
    t.text('target_endpoint_id');
  });
  // Events recorded before webhooks existed had no endpoint to go to.
  await knex.raw('UPDATE events SET dispatched_at = created_at');
  await knex.raw('CREATE INDEX events_undispatched ON events (created_at) WHERE dispatched_at IS NULL');
}

/** Forward-only: there is no down migration. */
export async function down(): Promise<void> {
  throw new Error('migrations are forward-only');
}

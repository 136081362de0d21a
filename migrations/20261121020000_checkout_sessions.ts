import type { Knex } from 'knex';

/** Checkout sessions and the event log every later part writes to. */
/** New tables and their indexes only. */
export const phase = 'expand';

export async function up(knex: Knex): Promise<void> {
  await knex.schema.createTable('checkout_sessions', (t) => {
    t.text('id').primary();
    t.text('merchant_id').notNullable().references('merchants.id');
    t.text('mode').notNullable().checkIn(['test', 'live']);
    t.text('code').notNullable().unique();
    t.text('status').notNullable().checkIn(['open', 'processing', 'completed', 'expired', 'canceled']);
    t.text('payment_status')
      .notNullable()
      .checkIn(['unpaid', 'paid', 'requires_offline_collection', 'partially_refunded', 'refunded']);
    t.text('reference_id').notNullable();
    t.bigInteger('amount').notNullable();
    t.text('currency').notNullable();
    t.jsonb('line_items').notNullable();
    /** sha256 of the canonical (amount, currency, line_items): reconciliation compares it. */
    t.text('price_key').notNullable();
    t.jsonb('payment_method_types').notNullable();
    t.jsonb('customer').notNullable();
    t.jsonb('collect').notNullable();
    t.jsonb('presentment');
    t.jsonb('payment');
    t.bigInteger('refunded_amount').notNullable().defaultTo(0);
    t.text('locale').notNullable();
    t.text('success_url').notNullable();
    t.text('cancel_url');
    t.jsonb('metadata').notNullable().defaultTo('{}');
    t.timestamp('expires_at', { useTz: true, precision: 3 }).notNullable();
    t.timestamp('completed_at', { useTz: true, precision: 3 });
    t.timestamp('created_at', { useTz: true, precision: 3 }).notNullable().defaultTo(knex.fn.now());
    t.timestamp('updated_at', { useTz: true, precision: 3 }).notNullable().defaultTo(knex.fn.now());
    t.index(['merchant_id', 'mode', 'created_at', 'id']);
    t.index(['merchant_id', 'mode', 'reference_id', 'created_at']);
  });
  // At most one session still being paid per (merchant, mode, reference_id).
  await knex.raw(
    `CREATE UNIQUE INDEX checkout_sessions_one_open ON checkout_sessions (merchant_id, mode, reference_id)
      WHERE status IN ('open', 'processing')`,
  );

  await knex.schema.createTable('events', (t) => {
    t.text('id').primary();
    t.text('merchant_id').notNullable().references('merchants.id');
    t.text('mode').notNullable().checkIn(['test', 'live']);
    t.text('type').notNullable();
    /** The object the event is about, as it was at the transition. */
    t.jsonb('data_object').notNullable();
    t.timestamp('created_at', { useTz: true, precision: 3 }).notNullable().defaultTo(knex.fn.now());
    t.index(['merchant_id', 'mode', 'created_at', 'id']);
    t.index(['merchant_id', 'mode', 'type', 'created_at', 'id']);
    t.index(['created_at']);
  });
}

/** Forward-only: there is no down migration. */
export async function down(): Promise<void> {
  throw new Error('migrations are forward-only');
}

import type { Knex } from 'knex';

/** Paying a session: payment attempts, phone OTP challenges, customer tokens and refunds. */
/** New tables and their indexes only. */
export const phase = 'expand';

export async function up(knex: Knex): Promise<void> {
  const ts = (t: Knex.CreateTableBuilder, name: string) =>
    t.timestamp(name, { useTz: true, precision: 3 }).notNullable().defaultTo(knex.fn.now());

  await knex.schema.createTable('payment_attempts', (t) => {
    t.text('id').primary();
    t.text('session_id').notNullable().references('checkout_sessions.id');
    t.text('merchant_id').notNullable().references('merchants.id');
    t.text('mode').notNullable().checkIn(['test', 'live']);
    t.text('method').notNullable();
    t.text('gateway').notNullable();
    t.text('flow').notNullable().checkIn(['redirect', 'offline']);
    t.text('status').notNullable().checkIn(['pending', 'succeeded', 'failed', 'canceled']);
    /** What the shopper is asked to pay, in the method's presented currency. */
    t.bigInteger('presented_amount').notNullable();
    t.text('presented_currency').notNullable();
    /** Session currency → presented currency, null when no conversion. */
    t.decimal('fx_rate', 20, 10);
    /** The test gateway's button, once pressed (succeeded, failed, canceled, slow). */
    t.text('decision').checkIn(['succeeded', 'failed', 'canceled', 'slow']);
    /** When the shopper came back without a button and the page asked to verify. */
    t.timestamp('verify_requested_at', { useTz: true, precision: 3 });
    t.text('failure_reason');
    t.text('gateway_reference');
    t.bigInteger('captured_amount');
    t.text('captured_currency');
    t.timestamp('captured_at', { useTz: true, precision: 3 });
    /** Status re-checks at the vendor (the pending path's backoff). */
    t.integer('checks').notNullable().defaultTo(0);
    t.timestamp('last_checked_at', { useTz: true, precision: 3 });
    t.timestamp('resolved_at', { useTz: true, precision: 3 });
    ts(t, 'created_at');
    ts(t, 'updated_at');
    t.index(['session_id', 'created_at']);
  });
  // At most one attempt with a vendor per session (the session reads `processing` meanwhile).
  await knex.raw(
    `CREATE UNIQUE INDEX payment_attempts_one_pending ON payment_attempts (session_id) WHERE status = 'pending'`,
  );

  await knex.schema.createTable('otp_challenges', (t) => {
    t.text('id').primary();
    t.text('session_id').notNullable().references('checkout_sessions.id');
    t.text('phone').notNullable();
    /** sha256 of the challenge id and the code; the code itself is never stored. */
    t.text('code_hash').notNullable();
    t.integer('failed_attempts').notNullable().defaultTo(0);
    t.timestamp('consumed_at', { useTz: true, precision: 3 });
    t.timestamp('expires_at', { useTz: true, precision: 3 }).notNullable();
    ts(t, 'created_at');
    t.index(['session_id', 'phone', 'created_at']);
  });

  await knex.schema.createTable('customer_tokens', (t) => {
    t.text('id').primary();
    t.text('session_id').notNullable().references('checkout_sessions.id');
    t.text('phone').notNullable();
    /** sha256 of the token's secret part, compared in constant time. */
    t.text('secret_hash').notNullable();
    t.timestamp('expires_at', { useTz: true, precision: 3 }).notNullable();
    ts(t, 'created_at');
  });

  await knex.schema.createTable('refunds', (t) => {
    t.text('id').primary();
    t.text('merchant_id').notNullable().references('merchants.id');
    t.text('mode').notNullable().checkIn(['test', 'live']);
    t.text('session_id').notNullable().references('checkout_sessions.id');
    t.text('attempt_id').notNullable().references('payment_attempts.id');
    t.bigInteger('amount').notNullable();
    t.text('currency').notNullable();
    t.text('reason').notNullable();
    t.text('initiated_by').notNullable();
    t.text('status').notNullable().checkIn(['requested', 'succeeded', 'failed']);
    t.text('gateway_reference');
    t.text('failure_reason');
    t.jsonb('metadata').notNullable().defaultTo('{}');
    /** The create's Idempotency-Key: a create run again after a 5xx finds its refund instead of making another. */
    t.text('idempotency_key');
    ts(t, 'created_at');
    ts(t, 'updated_at');
    t.index(['merchant_id', 'mode', 'created_at', 'id']);
    t.index(['session_id', 'created_at', 'id']);
  });
  await knex.raw(
    `CREATE UNIQUE INDEX refunds_idempotency_key ON refunds (merchant_id, mode, idempotency_key)
      WHERE idempotency_key IS NOT NULL`,
  );
}

/** Forward-only: there is no down migration. */
export async function down(): Promise<void> {
  throw new Error('migrations are forward-only');
}

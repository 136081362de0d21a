import type { Knex } from 'knex';

/**
 * Creates under an Idempotency-Key converge on one object: refunds and webhook endpoints carry the
 * key and a hash of the request (`request_hash`), unique per merchant and mode. A create run again
 * with the same key and request (concurrently, or after the 24-hour record is gone) finds the
 * object; the same key with another request after 24 hours is a fresh key and makes its own.
 * Refunds written before this carry no hash: they are never found again, which after 24 hours is
 * what the key promises.
 */
/** Drops refunds_idempotency_key (replaced by a wider unique index). */
export const phase = 'contract';

export async function up(knex: Knex): Promise<void> {
  await knex.schema.alterTable('refunds', (t) => {
    t.text('request_hash');
  });
  await knex.raw('DROP INDEX refunds_idempotency_key');
  await knex.raw(
    `CREATE UNIQUE INDEX refunds_idempotency_request ON refunds (merchant_id, mode, idempotency_key, request_hash)
      WHERE idempotency_key IS NOT NULL`,
  );
  await knex.schema.alterTable('webhook_endpoints', (t) => {
    t.text('idempotency_key');
    t.text('request_hash');
  });
  await knex.raw(
    `CREATE UNIQUE INDEX webhook_endpoints_idempotency_request
      ON webhook_endpoints (merchant_id, mode, idempotency_key, request_hash) WHERE idempotency_key IS NOT NULL`,
  );
}

/** Forward-only: there is no down migration. */
export async function down(): Promise<void> {
  throw new Error('migrations are forward-only');
}

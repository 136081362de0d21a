import type { Knex } from 'knex';

/**
 * The hosted page's own publishable key per merchant and mode: the page calls the public routes
 * with it like any drop-in would, so it needs the key itself, not only its hash. The plaintext is
 * kept encrypted (AES-256-GCM with the service's secret key, bound to merchant, mode and key id).
 */
/** A new table only. */
export const phase = 'expand';

export async function up(knex: Knex): Promise<void> {
  await knex.schema.createTable('hosted_page_keys', (t) => {
    t.text('merchant_id').notNullable().references('merchants.id').onDelete('CASCADE');
    t.text('mode').notNullable().checkIn(['test', 'live']);
    t.text('key_id').notNullable().references('checkout_keys.id');
    t.text('key_ciphertext').notNullable();
    t.timestamp('created_at', { useTz: true, precision: 3 }).notNullable().defaultTo(knex.fn.now());
    t.primary(['merchant_id', 'mode']);
  });
}

/** Forward-only: there is no down migration. */
export async function down(): Promise<void> {
  throw new Error('migrations are forward-only');
}

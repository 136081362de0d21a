import type { Knex } from 'knex';

/** Partner stock: the adjustment audit trail and the seller ledger it books to. */
/** New tables only. */
export const phase = 'expand';

export async function up(knex: Knex): Promise<void> {
  await knex.schema.createTable('stock_adjustments', (t) => {
    t.text('id').primary();
    t.text('seller_id').notNullable().references('sellers.id');
    t.text('variant_id').notNullable().references('variants.id');
    t.text('location_id').notNullable().references('stock_locations.id');
    t.text('external_sku').notNullable();
    t.integer('delta').notNullable();
    t.decimal('level_after', null).notNullable();
    t.text('reason').notNullable();
    t.text('category').notNullable().checkIn(['damaged', 'external_sale', 'correction', 'received']);
    t.decimal('unit_value', null);
    t.text('api_key_id');
    t.timestamp('created_at', { useTz: true, precision: 3 }).notNullable().defaultTo(knex.fn.now());
    t.index(['seller_id', 'created_at']);
    t.index(['variant_id']);
  });

  await knex.schema.createTable('seller_ledger_entries', (t) => {
    t.bigIncrements('id').primary();
    t.text('seller_id').notNullable().references('sellers.id');
    t.text('kind').notNullable().checkIn(['external_sale_revenue', 'external_sale_cogs', 'damaged_write_off']);
    t.bigInteger('amount').notNullable();
    t.text('external_sku').notNullable();
    t.text('variant_id').notNullable();
    t.text('adjustment_id').notNullable().references('stock_adjustments.id');
    t.timestamp('created_at', { useTz: true, precision: 3 }).notNullable().defaultTo(knex.fn.now());
    t.unique(['adjustment_id', 'kind']);
    t.index(['seller_id', 'id']);
  });
}

/** Forward-only: there is no down migration. */
export async function down(): Promise<void> {
  throw new Error('migrations are forward-only');
}

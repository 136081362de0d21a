import type { Knex } from 'knex';

/** Foundation schema: tenants, keys, catalog, orders, merchants, and the shared HTTP tables. */
/** New tables only. */
export const phase = 'expand';

export async function up(knex: Knex): Promise<void> {
  const ts = (t: Knex.CreateTableBuilder) => {
    t.timestamp('created_at', { useTz: true, precision: 3 }).notNullable().defaultTo(knex.fn.now());
  };

  // ---- Partner side -------------------------------------------------------------------------
  await knex.schema.createTable('sellers', (t) => {
    t.text('id').primary();
    t.text('name').notNullable();
    ts(t);
  });

  await knex.schema.createTable('stock_locations', (t) => {
    t.text('id').primary();
    t.text('seller_id').notNullable().references('sellers.id');
    t.text('name').notNullable();
    t.integer('position').notNullable(); // 0 is the primary location
    ts(t);
    t.unique(['seller_id', 'position']);
  });

  await knex.schema.createTable('partner_keys', (t) => {
    t.text('id').primary(); // key_id, the public part of the key
    t.text('seller_id').notNullable().references('sellers.id');
    t.text('env').notNullable().checkIn(['test', 'live']);
    t.text('secret_hash').notNullable(); // sha256 hex of the secret; the secret is never stored
    t.specificType('scopes', 'text[]').notNullable();
    t.timestamp('revoked_at', { useTz: true, precision: 3 });
    ts(t);
    t.index(['seller_id']);
  });

  await knex.schema.createTable('categories', (t) => {
    t.text('id').primary();
    t.text('name').notNullable();
    t.boolean('catalog_only').notNullable().defaultTo(false);
    ts(t);
  });

  await knex.schema.createTable('products', (t) => {
    t.text('id').primary(); // time-ordered, so ordering by id is creation order
    t.text('seller_id').notNullable().references('sellers.id');
    t.text('title').notNullable();
    t.text('handle').notNullable();
    t.text('status').notNullable().checkIn(['draft', 'proposed', 'published', 'rejected']);
    t.text('description').notNullable().defaultTo('');
    t.text('thumbnail');
    t.jsonb('images').notNullable().defaultTo('[]');
    t.jsonb('brand');
    t.boolean('catalog_managed').notNullable().defaultTo(false);
    t.text('handling').checkIn(['none', 'fragile', 'sealed', 'cold']);
    t.text('rejection_reason');
    ts(t);
    t.timestamp('updated_at', { useTz: true, precision: 3 }).notNullable().defaultTo(knex.fn.now());
    t.index(['seller_id', 'id']);
    t.index(['seller_id', 'status', 'id']);
  });

  await knex.schema.createTable('product_categories', (t) => {
    t.text('product_id').notNullable().references('products.id').onDelete('CASCADE');
    t.text('category_id').notNullable().references('categories.id');
    t.integer('position').notNullable().defaultTo(0);
    t.primary(['product_id', 'category_id']);
  });

  await knex.schema.createTable('variants', (t) => {
    t.text('id').primary();
    t.text('offer_id').notNullable().unique();
    t.text('product_id').notNullable().references('products.id').onDelete('CASCADE');
    t.text('seller_id').notNullable().references('sellers.id');
    t.text('sku').notNullable();
    t.jsonb('options').notNullable().defaultTo('{}');
    t.bigInteger('price').notNullable();
    t.bigInteger('sale_price');
    t.text('campaign_label');
    t.integer('campaign_percent');
    t.bigInteger('unit_cost');
    t.text('condition');
    t.text('notes');
    ts(t);
    t.timestamp('updated_at', { useTz: true, precision: 3 }).notNullable().defaultTo(knex.fn.now());
    t.index(['seller_id', 'sku']);
    t.index(['product_id']);
  });

  await knex.schema.createTable('stock_levels', (t) => {
    t.text('variant_id').notNullable().references('variants.id').onDelete('CASCADE');
    t.text('location_id').notNullable().references('stock_locations.id');
    t.decimal('level', null).notNullable().defaultTo(0); // numeric: levels may be fractional
    t.timestamp('updated_at', { useTz: true, precision: 3 }).notNullable().defaultTo(knex.fn.now());
    t.primary(['variant_id', 'location_id']);
  });

  await knex.schema.createTable('orders', (t) => {
    t.text('id').primary();
    t.text('seller_id').notNullable().references('sellers.id');
    t.text('increment_id').notNullable().unique();
    t.text('status').notNullable().checkIn(['pending', 'accepted', 'shipped', 'delivered', 'cancelled', 'returned']);
    t.bigInteger('total').notNullable();
    t.text('currency').notNullable().defaultTo('IQD');
    t.jsonb('shipping_address').notNullable();
    t.timestamp('accepted_at', { useTz: true, precision: 3 });
    t.timestamp('shipped_at', { useTz: true, precision: 3 });
    t.text('tracking_number');
    t.text('carrier');
    ts(t);
    t.timestamp('updated_at', { useTz: true, precision: 3 }).notNullable().defaultTo(knex.fn.now());
  });

  await knex.schema.createTable('order_items', (t) => {
    t.text('id').primary();
    t.text('order_id').notNullable().references('orders.id').onDelete('CASCADE');
    t.text('variant_id').notNullable();
    t.text('external_sku').notNullable();
    t.text('title').notNullable();
    t.integer('quantity').notNullable();
    t.bigInteger('unit_price').notNullable();
    t.integer('position').notNullable();
    t.index(['order_id']);
  });

  // The seller's settlement record; its created_at is when the order was placed with the seller.
  await knex.schema.createTable('settlements', (t) => {
    t.text('order_id').primary().references('orders.id').onDelete('CASCADE');
    t.text('seller_id').notNullable().references('sellers.id');
    t.text('status').notNullable().checkIn(['held', 'released', 'reversed']);
    t.decimal('commission_percent', 5, 2).notNullable();
    t.bigInteger('commission_amount').notNullable();
    t.bigInteger('earnings').notNullable();
    t.integer('hold_days').notNullable();
    t.timestamp('hold_starts_at', { useTz: true, precision: 3 });
    t.timestamp('funds_released_at', { useTz: true, precision: 3 });
    t.text('delivery_confirmation_source');
    ts(t);
    t.index(['seller_id', 'created_at', 'order_id']);
  });

  // ---- Checkout side ------------------------------------------------------------------------
  await knex.schema.createTable('merchants', (t) => {
    t.text('id').primary();
    t.text('display_name').notNullable();
    t.text('contact_email');
    t.text('logo_url');
    t.text('accent');
    t.boolean('test_merchant').notNullable().defaultTo(false);
    t.boolean('suspended').notNullable().defaultTo(false);
    ts(t);
  });

  await knex.schema.createTable('merchant_return_hosts', (t) => {
    t.text('merchant_id').notNullable().references('merchants.id').onDelete('CASCADE');
    t.text('host').notNullable(); // exact host name, or `*.example.com` for sub-domains
    t.primary(['merchant_id', 'host']);
  });

  await knex.schema.createTable('checkout_keys', (t) => {
    t.text('id').primary();
    t.text('merchant_id').notNullable().references('merchants.id');
    t.text('mode').notNullable().checkIn(['test', 'live']);
    t.text('type').notNullable().checkIn(['secret', 'publishable']);
    t.text('secret_hash').notNullable();
    t.specificType('scopes', 'text[]').notNullable();
    t.timestamp('revoked_at', { useTz: true, precision: 3 });
    ts(t);
    t.index(['merchant_id']);
  });

  await knex.schema.createTable('merchant_methods', (t) => {
    t.text('merchant_id').notNullable().references('merchants.id').onDelete('CASCADE');
    t.text('mode').notNullable().checkIn(['test', 'live']);
    t.text('code').notNullable();
    t.boolean('enabled').notNullable();
    t.timestamp('updated_at', { useTz: true, precision: 3 }).notNullable().defaultTo(knex.fn.now());
    t.primary(['merchant_id', 'mode', 'code']);
  });

  await knex.schema.createTable('fx_rates', (t) => {
    t.text('from_currency').notNullable();
    t.text('to_currency').notNullable();
    t.decimal('rate', 20, 10).notNullable();
    t.timestamp('updated_at', { useTz: true, precision: 3 }).notNullable().defaultTo(knex.fn.now());
    t.primary(['from_currency', 'to_currency']);
  });

  // ---- Shared HTTP plumbing -----------------------------------------------------------------
  // One row per (scope, key): scope is `partner:<key_id>` or `checkout:<merchant>:<mode>`.
  await knex.schema.createTable('idempotency_records', (t) => {
    t.text('scope').notNullable();
    t.text('key').notNullable();
    t.text('route').notNullable();
    t.text('body_hash').notNullable();
    t.text('state').notNullable().checkIn(['in_progress', 'done']);
    t.integer('response_status');
    t.jsonb('response_body');
    ts(t);
    t.timestamp('completed_at', { useTz: true, precision: 3 });
    t.primary(['scope', 'key']);
    t.index(['created_at']);
  });

  await knex.schema.createTable('rate_limit_windows', (t) => {
    t.text('bucket').notNullable();
    t.timestamp('window_start', { useTz: true, precision: 3 }).notNullable();
    t.integer('count').notNullable();
    t.primary(['bucket', 'window_start']);
    t.index(['window_start']);
  });

  // Messages to people (e-mail, SMS) recorded by the development adapters.
  await knex.schema.createTable('outbox', (t) => {
    t.bigIncrements('id').primary();
    t.text('kind').notNullable().checkIn(['email', 'sms']);
    t.text('to').notNullable();
    t.text('subject');
    t.text('body').notNullable();
    ts(t);
    t.index(['kind', 'id']);
  });
}

/** Forward-only: there is no down migration. */
export async function down(): Promise<void> {
  throw new Error('migrations are forward-only');
}

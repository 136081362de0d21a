import { execFile } from 'node:child_process';
import { promisify } from 'node:util';
import { run } from '../../src/cli/run';
import type { CliDeps } from '../../src/cli/command';
import { loadSettings } from '../../src/config';
import { createDb, Db } from '../../src/db/knex';
import { checkPassword } from '../../src/console/accounts';
import { tokenHash } from '../../src/console/tokens';
import { parseKey } from '../../src/keys/keys';
import { checkoutScopes, partnerScopes } from '../../src/keys/scopes';
import { createProduct, ProductStatus } from '../../src/ops/products';
import { ownDatabase } from '../helpers/services';
import { readRunEnv } from '../helpers/stack';

const ISO_MS = /^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}\.\d{3}Z$/;

let db: Db;
let deps: CliDeps;
let databaseUrl: string;

beforeAll(() => {
  databaseUrl = readRunEnv().databaseUrl;
  db = createDb(databaseUrl, 4);
  deps = {
    db,
    settings: loadSettings({
      DATABASE_URL: databaseUrl,
      PUBLIC_BASE_URL: 'http://api.test:4000',
      LOG_LEVEL: 'silent',
      WEBHOOK_SECRET_KEY: 'b'.repeat(64),
    }),
  };
});
afterAll(() => db.destroy());

/** Runs a command with `--json` and returns its document; fails the test on a non-zero exit. */
async function ops(...argv: string[]): Promise<any> {
  const result = await run([...argv, '--json'], deps);
  if (result.exitCode !== 0) throw new Error(`ops ${argv.join(' ')} failed: ${result.stdout}${result.stderr}`);
  return JSON.parse(result.stdout);
}

/** Runs a command expected to fail and returns its exit status and error document. */
async function opsError(...argv: string[]): Promise<{ exitCode: number; error: { code: string; message: string } }> {
  const result = await run([...argv, '--json'], deps);
  const doc = JSON.parse(result.stdout);
  expect(Object.keys(doc)).toEqual(['error']);
  return { exitCode: result.exitCode, error: doc.error };
}

let skuCounter = 0;
const uniqueSku = (prefix = 'SKU') => `${prefix}-${Date.now().toString(36)}-${++skuCounter}`;

async function newSeller(locations = 1): Promise<{ seller_id: string; locations: Array<{ id: string }> }> {
  return ops('seller', 'create', '--name', 'Test Seller', '--locations', String(locations));
}

async function newCatalogProduct(sellerId: string, price = 15000) {
  const sku = uniqueSku();
  const doc = await ops(
    'product',
    'create-catalog',
    '--seller',
    sellerId,
    '--sku',
    sku,
    '--title',
    'Phone Case',
    '--price',
    String(price),
  );
  return { sku, productId: doc.product_id as string, variantId: doc.variants[0].variant_id as string };
}

async function newProduct(sellerId: string, status: ProductStatus): Promise<string> {
  const product = await createProduct(db, {
    sellerId,
    title: 'Seller Product',
    status,
    catalogManaged: false,
    variants: [{ sku: uniqueSku(), price: 1000 }],
  });
  return product.product_id;
}

async function newMerchant(...extra: string[]): Promise<string> {
  const doc = await ops('merchant', 'create', '--name', 'Shop', '--return-hosts', 'shop.example', ...extra);
  return doc.merchant_id;
}

describe('errors', () => {
  it('an unknown command exits 1 with the error document', async () => {
    expect(await opsError('seller', 'explode')).toEqual({
      exitCode: 1,
      error: { code: 'unknown_command', message: expect.stringContaining('seller explode') },
    });
  });

  it('an unknown flag is unknown_flag', async () => {
    expect(await opsError('seller', 'create', '--name', 'A', '--colour', 'red')).toMatchObject({
      exitCode: 1,
      error: { code: 'unknown_flag' },
    });
  });

  it('a missing required flag is missing_flag naming it', async () => {
    expect(await opsError('seller', 'create')).toEqual({
      exitCode: 1,
      error: { code: 'missing_flag', message: '--name is required' },
    });
  });

  it('a flag value of the wrong type is invalid_flag', async () => {
    expect((await opsError('seller', 'create', '--name', 'A', '--locations', 'two')).error.code).toBe('invalid_flag');
  });

  it('without --json a refusal goes to stderr and stdout stays empty', async () => {
    const result = await run(['seller', 'create'], deps);
    expect(result).toEqual({ exitCode: 1, stdout: '', stderr: 'error: --name is required (missing_flag)\n' });
  });

  it('without --json a result is a readable key-value listing', async () => {
    const result = await run(['seller', 'create', '--name', 'Readable', '--locations', '2'], deps);
    expect(result.exitCode).toBe(0);
    expect(result.stdout).toMatch(
      /^seller_id +sel_\w+\nname +Readable\nlocations:\n +id +name\n +loc_\w+ +Primary warehouse\n/,
    );
  });
});

describe('seller create', () => {
  it('creates one primary location by default', async () => {
    const doc = await ops('seller', 'create', '--name', 'Acme');
    expect(doc).toEqual({
      seller_id: expect.stringMatching(/^sel_/),
      name: 'Acme',
      locations: [{ id: expect.stringMatching(/^loc_/), name: 'Primary warehouse' }],
    });
    const rows = await db('stock_locations').where({ seller_id: doc.seller_id });
    expect(rows).toEqual([expect.objectContaining({ id: doc.locations[0].id, position: 0 })]);
  });

  it('--locations 0 makes a seller with no stock location', async () => {
    const doc = await ops('seller', 'create', '--name', 'No Stock', '--locations', '0');
    expect(doc.locations).toEqual([]);
  });

  it('lists locations primary first', async () => {
    const doc = await newSeller(3);
    const rows = await db('stock_locations').where({ seller_id: doc.seller_id }).orderBy('position');
    expect(rows.map((r) => r.id)).toEqual(doc.locations.map((l) => l.id));
  });
});

describe('partner-key', () => {
  it('create prints the full key once and stores only a hash', async () => {
    const seller = await newSeller();
    const doc = await ops(
      'partner-key',
      'create',
      '--seller',
      seller.seller_id,
      '--env',
      'test',
      '--scopes',
      'catalog:read,orders:read',
    );
    expect(doc).toEqual({
      key: expect.any(String),
      key_id: expect.any(String),
      seller_id: seller.seller_id,
      scopes: ['catalog:read', 'orders:read'],
      env: 'test',
    });
    const parsed = parseKey(doc.key);
    expect(parsed).toMatchObject({ kind: 'sk', mode: 'test', keyId: doc.key_id });
    const row = await db('partner_keys').where({ id: doc.key_id }).first();
    expect(row.secret_hash).not.toContain(parsed!.secret);
  });

  it('create refuses an unknown scope', async () => {
    const seller = await newSeller();
    const { error } = await opsError(
      'partner-key',
      'create',
      '--seller',
      seller.seller_id,
      '--env',
      'live',
      '--scopes',
      'catalog:read,everything',
    );
    expect(error).toEqual({ code: 'invalid_scopes', message: expect.stringContaining('everything') });
  });

  it('create refuses an env other than test or live', async () => {
    const seller = await newSeller();
    const { error } = await opsError(
      'partner-key',
      'create',
      '--seller',
      seller.seller_id,
      '--env',
      'sandbox',
      '--scopes',
      'catalog:read',
    );
    expect(error.code).toBe('invalid_flag');
  });

  it('create for an unknown seller is seller_not_found', async () => {
    const { exitCode, error } = await opsError(
      'partner-key',
      'create',
      '--seller',
      'sel_nope',
      '--env',
      'test',
      '--scopes',
      '',
    );
    expect(exitCode).toBe(1);
    expect(error.code).toBe('seller_not_found');
  });

  it('revoke sets revoked_at once; revoking again keeps the first time', async () => {
    const seller = await newSeller();
    const key = await ops(
      'partner-key',
      'create',
      '--seller',
      seller.seller_id,
      '--env',
      'live',
      '--scopes',
      partnerScopes.join(','),
    );
    const first = await ops('partner-key', 'revoke', '--key-id', key.key_id);
    expect(first).toEqual({ key_id: key.key_id, revoked_at: expect.stringMatching(ISO_MS) });
    expect(await ops('partner-key', 'revoke', '--key-id', key.key_id)).toEqual(first);
  });

  it('set-scopes replaces the scopes', async () => {
    const seller = await newSeller();
    const key = await ops(
      'partner-key',
      'create',
      '--seller',
      seller.seller_id,
      '--env',
      'test',
      '--scopes',
      'catalog:read',
    );
    const doc = await ops(
      'partner-key',
      'set-scopes',
      '--key-id',
      key.key_id,
      '--scopes',
      'inventory:write, catalog:write',
    );
    expect(doc).toEqual({ key_id: key.key_id, scopes: ['inventory:write', 'catalog:write'] });
  });

  it('an unknown key id is key_not_found', async () => {
    expect((await opsError('partner-key', 'revoke', '--key-id', 'nosuchkey123')).error.code).toBe('key_not_found');
  });
});

describe('category create', () => {
  it('creates a catalog-only category with --catalog-only', async () => {
    const doc = await ops('category', 'create', '--name', 'Phones', '--catalog-only');
    expect(doc).toEqual({ category_id: expect.stringMatching(/^cat_/), name: 'Phones', catalog_only: true });
    expect(await db('categories').where({ id: doc.category_id }).first()).toMatchObject({ catalog_only: true });
  });

  it('creates an open category by default', async () => {
    const doc = await ops('category', 'create', '--name', 'Mugs');
    expect(doc.catalog_only).toBe(false);
  });
});

describe('product create-catalog', () => {
  it('creates a published catalog-managed product with one Default variant stocked at 0', async () => {
    const seller = await newSeller(2);
    const category = await ops('category', 'create', '--name', 'Cases', '--catalog-only');
    const doc = await ops(
      'product',
      'create-catalog',
      '--seller',
      seller.seller_id,
      '--sku',
      'CASE-1',
      '--title',
      'Phone Case: Blue!',
      '--price',
      '12500',
      '--categories',
      category.category_id,
    );
    expect(doc).toEqual({
      product_id: expect.stringMatching(/^prod_/),
      seller_id: seller.seller_id,
      title: 'Phone Case: Blue!',
      handle: expect.stringMatching(/^phone-case-blue-[a-z0-9]{6}$/),
      status: 'published',
      catalog_managed: true,
      category_ids: [category.category_id],
      variants: [
        {
          variant_id: expect.stringMatching(/^var_/),
          offer_id: expect.stringMatching(/^off_/),
          product_id: doc.product_id,
          sku: 'CASE-1',
          options: { Default: 'Default' },
          price: 12500,
        },
      ],
    });
    const levels = await db('stock_levels').where({ variant_id: doc.variants[0].variant_id });
    expect(levels).toEqual([expect.objectContaining({ location_id: seller.locations[0].id, level: '0' })]);
  });

  it('creates no stock record when the seller has no location', async () => {
    const seller = await newSeller(0);
    const { variantId } = await newCatalogProduct(seller.seller_id);
    expect(await db('stock_levels').where({ variant_id: variantId })).toEqual([]);
  });

  it('refuses a price that is not a whole number', async () => {
    const seller = await newSeller();
    const fractional = await opsError(
      'product',
      'create-catalog',
      '--seller',
      seller.seller_id,
      '--sku',
      'X',
      '--title',
      'X',
      '--price',
      '1.5',
    );
    expect(fractional.error.code).toBe('invalid_flag');
    const negative = await opsError(
      'product',
      'create-catalog',
      '--seller',
      seller.seller_id,
      '--sku',
      'X',
      '--title',
      'X',
      '--price',
      '-1',
    );
    expect(negative.error.code).toBe('invalid_price');
  });

  it('refuses an unknown category', async () => {
    const seller = await newSeller();
    const { error } = await opsError(
      'product',
      'create-catalog',
      '--seller',
      seller.seller_id,
      '--sku',
      'X',
      '--title',
      'X',
      '--price',
      '1',
      '--categories',
      'cat_nope',
    );
    expect(error.code).toBe('category_not_found');
  });
});

describe('product add-variant', () => {
  it('adds a variant with its options and a stock record at the primary location', async () => {
    const seller = await newSeller();
    const { productId } = await newCatalogProduct(seller.seller_id);
    const doc = await ops(
      'product',
      'add-variant',
      '--product',
      productId,
      '--sku',
      'CASE-RED-L',
      '--price',
      '13000',
      '--option',
      'Color=Red',
      '--option',
      'Size=L',
    );
    expect(doc).toEqual({
      variant_id: expect.stringMatching(/^var_/),
      offer_id: expect.stringMatching(/^off_/),
      product_id: productId,
      sku: 'CASE-RED-L',
      options: { Color: 'Red', Size: 'L' },
      price: 13000,
    });
    const row = await db('variants').where({ id: doc.variant_id }).first();
    expect(row).toMatchObject({ seller_id: seller.seller_id, options: { Color: 'Red', Size: 'L' } });
    expect(
      await db('stock_levels').where({ variant_id: doc.variant_id, location_id: seller.locations[0].id }),
    ).toHaveLength(1);
  });

  it('refuses an --option without Name=Value', async () => {
    const seller = await newSeller();
    const { productId } = await newCatalogProduct(seller.seller_id);
    const { error } = await opsError(
      'product',
      'add-variant',
      '--product',
      productId,
      '--sku',
      'Y',
      '--price',
      '1',
      '--option',
      'Red',
    );
    expect(error.code).toBe('invalid_flag');
  });

  it('an unknown product is product_not_found', async () => {
    const { error } = await opsError('product', 'add-variant', '--product', 'prod_nope', '--sku', 'Y', '--price', '1');
    expect(error.code).toBe('product_not_found');
  });
});

describe('product review transitions', () => {
  it('submit moves draft to proposed', async () => {
    const seller = await newSeller();
    const productId = await newProduct(seller.seller_id, 'draft');
    expect(await ops('product', 'submit', '--product', productId)).toEqual({
      product_id: productId,
      status: 'proposed',
      rejection_reason: null,
    });
  });

  it('approve moves proposed to published', async () => {
    const seller = await newSeller();
    const productId = await newProduct(seller.seller_id, 'proposed');
    expect((await ops('product', 'approve', '--product', productId)).status).toBe('published');
  });

  it('reject moves proposed to rejected with the reason', async () => {
    const seller = await newSeller();
    const productId = await newProduct(seller.seller_id, 'proposed');
    expect(await ops('product', 'reject', '--product', productId, '--reason', 'Blurry photos')).toEqual({
      product_id: productId,
      status: 'rejected',
      rejection_reason: 'Blurry photos',
    });
    expect(await db('products').where({ id: productId }).first()).toMatchObject({
      status: 'rejected',
      rejection_reason: 'Blurry photos',
    });
  });

  it('resubmit moves rejected to proposed and clears the reason', async () => {
    const seller = await newSeller();
    const productId = await newProduct(seller.seller_id, 'proposed');
    await ops('product', 'reject', '--product', productId, '--reason', 'No description');
    expect(await ops('product', 'resubmit', '--product', productId)).toEqual({
      product_id: productId,
      status: 'proposed',
      rejection_reason: null,
    });
  });

  it('a product in the wrong status is invalid_transition and is not changed', async () => {
    const seller = await newSeller();
    const productId = await newProduct(seller.seller_id, 'draft');
    const { exitCode, error } = await opsError('product', 'approve', '--product', productId);
    expect(exitCode).toBe(1);
    expect(error).toEqual({ code: 'invalid_transition', message: expect.stringContaining('draft') });
    expect((await db('products').where({ id: productId }).first()).status).toBe('draft');
  });

  it('reject needs a reason', async () => {
    const seller = await newSeller();
    const productId = await newProduct(seller.seller_id, 'proposed');
    expect((await opsError('product', 'reject', '--product', productId)).error.code).toBe('missing_flag');
  });

  it('an unknown product is product_not_found', async () => {
    expect((await opsError('product', 'submit', '--product', 'prod_nope')).error.code).toBe('product_not_found');
  });
});

describe('product set-unit-cost', () => {
  it('sets the variant unit cost', async () => {
    const seller = await newSeller();
    const { sku, variantId } = await newCatalogProduct(seller.seller_id);
    expect(await ops('product', 'set-unit-cost', '--seller', seller.seller_id, '--sku', sku, '--cost', '9000')).toEqual(
      {
        variant_id: variantId,
        sku,
        unit_cost: 9000,
      },
    );
    expect((await db('variants').where({ id: variantId }).first()).unit_cost).toBe(9000);
  });

  it("another seller's SKU is product_not_found", async () => {
    const owner = await newSeller();
    const other = await newSeller();
    const { sku } = await newCatalogProduct(owner.seller_id);
    const { error } = await opsError(
      'product',
      'set-unit-cost',
      '--seller',
      other.seller_id,
      '--sku',
      sku,
      '--cost',
      '1',
    );
    expect(error.code).toBe('product_not_found');
  });
});

describe('stock set', () => {
  it('sets a fractional level at a location and overwrites it on the next call', async () => {
    const seller = await newSeller(2);
    const { sku, variantId } = await newCatalogProduct(seller.seller_id);
    const second = seller.locations[1].id;
    expect(
      await ops('stock', 'set', '--seller', seller.seller_id, '--sku', sku, '--location', second, '--level', '2.5'),
    ).toEqual({
      variant_id: variantId,
      location_id: second,
      level: 2.5,
    });
    await ops('stock', 'set', '--seller', seller.seller_id, '--sku', sku, '--location', second, '--level', '7');
    const row = await db('stock_levels').where({ variant_id: variantId, location_id: second }).first();
    expect(Number(row.level)).toBe(7);
  });

  it("refuses another seller's location", async () => {
    const seller = await newSeller();
    const other = await newSeller();
    const { sku } = await newCatalogProduct(seller.seller_id);
    const { error } = await opsError(
      'stock',
      'set',
      '--seller',
      seller.seller_id,
      '--sku',
      sku,
      '--location',
      other.locations[0].id,
      '--level',
      '1',
    );
    expect(error.code).toBe('location_not_found');
  });

  it('refuses a negative level', async () => {
    const seller = await newSeller();
    const { sku } = await newCatalogProduct(seller.seller_id);
    const { error } = await opsError(
      'stock',
      'set',
      '--seller',
      seller.seller_id,
      '--sku',
      sku,
      '--location',
      seller.locations[0].id,
      '--level',
      '-1',
    );
    expect(error.code).toBe('invalid_level');
  });
});

describe('campaign', () => {
  it('start sets sale_price = round(price * (100 - percent) / 100) and the label', async () => {
    const seller = await newSeller();
    const { sku, variantId } = await newCatalogProduct(seller.seller_id, 999);
    expect(
      await ops(
        'campaign',
        'start',
        '--seller',
        seller.seller_id,
        '--sku',
        sku,
        '--percent',
        '50',
        '--label',
        'Half off',
      ),
    ).toEqual({
      variant_id: variantId,
      sku,
      price: 999,
      sale_price: 500,
      campaign_label: 'Half off',
      campaign_percent: 50,
    });
  });

  it('start refuses a percent outside 1..99', async () => {
    const seller = await newSeller();
    const { sku } = await newCatalogProduct(seller.seller_id);
    for (const percent of ['0', '100']) {
      const { error } = await opsError(
        'campaign',
        'start',
        '--seller',
        seller.seller_id,
        '--sku',
        sku,
        '--percent',
        percent,
        '--label',
        'X',
      );
      expect(error.code).toBe('invalid_percent');
    }
  });

  it('end clears the sale price and label; the list price stays', async () => {
    const seller = await newSeller();
    const { sku, variantId } = await newCatalogProduct(seller.seller_id, 20000);
    await ops('campaign', 'start', '--seller', seller.seller_id, '--sku', sku, '--percent', '15', '--label', 'Eid');
    expect(await ops('campaign', 'end', '--seller', seller.seller_id, '--sku', sku)).toEqual({
      variant_id: variantId,
      sku,
      price: 20000,
      sale_price: null,
      campaign_label: null,
      campaign_percent: null,
    });
  });
});

describe('order create', () => {
  it('places a pending order with items at the effective price and a held settlement', async () => {
    const seller = await newSeller();
    const a = await newCatalogProduct(seller.seller_id, 10000);
    const b = await newCatalogProduct(seller.seller_id, 3333);
    await ops('campaign', 'start', '--seller', seller.seller_id, '--sku', a.sku, '--percent', '20', '--label', 'Sale');
    const doc = await ops('order', 'create', '--seller', seller.seller_id, '--items', `${a.sku}:2,${b.sku}:1:3000`);
    expect(doc).toEqual({
      order_id: expect.stringMatching(/^ord_/),
      increment_id: expect.stringMatching(/^[1-9]\d{8}$/),
      seller_id: seller.seller_id,
      status: 'pending',
      total: 19000,
      currency: 'IQD',
      created_at: expect.stringMatching(ISO_MS),
      items: [
        {
          item_id: expect.stringMatching(/^item_/),
          variant_id: a.variantId,
          external_sku: a.sku,
          title: 'Phone Case',
          quantity: 2,
          unit_price: 8000,
        },
        {
          item_id: expect.stringMatching(/^item_/),
          variant_id: b.variantId,
          external_sku: b.sku,
          title: 'Phone Case',
          quantity: 1,
          unit_price: 3000,
        },
      ],
      settlement: { status: 'held', commission_percent: 10, commission_amount: 1900, earnings: 17100, hold_days: 7 },
    });
    const order = await db('orders').where({ id: doc.order_id }).first();
    expect(order.shipping_address).toEqual({
      first_name: expect.any(String),
      last_name: expect.any(String),
      address_1: expect.any(String),
      city: expect.any(String),
      phone: expect.stringMatching(/^\+964/),
    });
    const settlement = await db('settlements').where({ order_id: doc.order_id }).first();
    expect(settlement).toMatchObject({
      seller_id: seller.seller_id,
      status: 'held',
      commission_amount: 1900,
      earnings: 17100,
      hold_days: 7,
    });
  });

  it('--created-at sets the order and the settlement creation time', async () => {
    const seller = await newSeller();
    const { sku } = await newCatalogProduct(seller.seller_id);
    const doc = await ops(
      'order',
      'create',
      '--seller',
      seller.seller_id,
      '--items',
      `${sku}:1`,
      '--created-at',
      '2026-01-02T03:04:05+03:00',
    );
    expect(doc.created_at).toBe('2026-01-02T00:04:05.000Z');
    const settlement = await db('settlements').where({ order_id: doc.order_id }).first();
    const order = await db('orders').where({ id: doc.order_id }).first();
    expect([settlement.created_at.toISOString(), order.created_at.toISOString()]).toEqual([
      doc.created_at,
      doc.created_at,
    ]);
  });

  it('gives every order its own increment_id', async () => {
    const seller = await newSeller();
    const { sku } = await newCatalogProduct(seller.seller_id);
    const docs = await Promise.all(
      [1, 2, 3].map(() => ops('order', 'create', '--seller', seller.seller_id, '--items', `${sku}:1`)),
    );
    expect(new Set(docs.map((d) => d.increment_id)).size).toBe(3);
  });

  it('refuses malformed items and unknown SKUs', async () => {
    const seller = await newSeller();
    const { sku } = await newCatalogProduct(seller.seller_id);
    for (const items of [`${sku}`, `${sku}:0`, `${sku}:1:x`, `${sku}:1:2:3`]) {
      const { error } = await opsError('order', 'create', '--seller', seller.seller_id, '--items', items);
      expect([items, error.code]).toEqual([items, expect.stringMatching(/^invalid_(flag|quantity)$/)]);
    }
    expect((await opsError('order', 'create', '--seller', seller.seller_id, '--items', 'NOPE:1')).error.code).toBe(
      'product_not_found',
    );
  });

  it('refuses a --created-at without a zone', async () => {
    const seller = await newSeller();
    const { sku } = await newCatalogProduct(seller.seller_id);
    const { error } = await opsError(
      'order',
      'create',
      '--seller',
      seller.seller_id,
      '--items',
      `${sku}:1`,
      '--created-at',
      '2026-01-02T03:04:05',
    );
    expect(error.code).toBe('invalid_flag');
  });
});

describe('order set-status', () => {
  async function newOrder(): Promise<string> {
    const seller = await newSeller();
    const { sku } = await newCatalogProduct(seller.seller_id);
    return (await ops('order', 'create', '--seller', seller.seller_id, '--items', `${sku}:1`)).order_id;
  }

  it('accepted sets accepted_at', async () => {
    const orderId = await newOrder();
    expect(await ops('order', 'set-status', '--order', orderId, '--status', 'accepted')).toEqual({
      order_id: orderId,
      status: 'accepted',
      accepted_at: expect.stringMatching(ISO_MS),
      shipped_at: null,
      tracking_number: null,
      carrier: null,
      settlement_status: 'held',
    });
  });

  it('shipped sets shipped_at, tracking and carrier', async () => {
    const orderId = await newOrder();
    await ops('order', 'set-status', '--order', orderId, '--status', 'accepted');
    const doc = await ops(
      'order',
      'set-status',
      '--order',
      orderId,
      '--status',
      'shipped',
      '--tracking',
      'TRK1',
      '--carrier',
      'Aramex',
    );
    expect(doc).toMatchObject({
      status: 'shipped',
      shipped_at: expect.stringMatching(ISO_MS),
      tracking_number: 'TRK1',
      carrier: 'Aramex',
    });
  });

  it('delivered starts the settlement hold', async () => {
    const orderId = await newOrder();
    await ops('order', 'set-status', '--order', orderId, '--status', 'shipped');
    const doc = await ops('order', 'set-status', '--order', orderId, '--status', 'delivered');
    expect(doc).toMatchObject({
      status: 'delivered',
      accepted_at: expect.stringMatching(ISO_MS),
      settlement_status: 'held',
    });
    const settlement = await db('settlements').where({ order_id: orderId }).first();
    expect(settlement).toMatchObject({ hold_starts_at: expect.any(Date), delivery_confirmation_source: 'operator' });
  });

  it('cancelled reverses the held settlement', async () => {
    const orderId = await newOrder();
    expect(await ops('order', 'set-status', '--order', orderId, '--status', 'cancelled')).toMatchObject({
      status: 'cancelled',
      settlement_status: 'reversed',
    });
  });

  it('a shipped order cannot be cancelled', async () => {
    const orderId = await newOrder();
    await ops('order', 'set-status', '--order', orderId, '--status', 'shipped');
    expect((await opsError('order', 'set-status', '--order', orderId, '--status', 'cancelled')).error.code).toBe(
      'invalid_transition',
    );
  });

  it('refuses an unknown status and an unknown order', async () => {
    const orderId = await newOrder();
    expect((await opsError('order', 'set-status', '--order', orderId, '--status', 'lost')).error.code).toBe(
      'invalid_status',
    );
    expect((await opsError('order', 'set-status', '--order', 'ord_nope', '--status', 'accepted')).error.code).toBe(
      'order_not_found',
    );
  });
});

describe('merchant', () => {
  it('create stores return hosts and enables methods (test in test mode only)', async () => {
    const doc = await ops(
      'merchant',
      'create',
      '--name',
      'Corner Shop',
      '--return-hosts',
      'Shop.example, *.shop.example',
      '--contact-email',
      'ops@shop.example',
      '--methods',
      'test,cashondelivery',
      '--test-merchant',
    );
    expect(doc).toEqual({
      merchant_id: expect.stringMatching(/^mer_/),
      name: 'Corner Shop',
      return_hosts: ['shop.example', '*.shop.example'],
      methods: ['test', 'cashondelivery'],
      test_merchant: true,
    });
    const methods = await db('merchant_methods').where({ merchant_id: doc.merchant_id }).orderBy(['mode', 'code']);
    expect(methods.map((m) => `${m.mode}:${m.code}`)).toEqual([
      'live:cashondelivery',
      'test:cashondelivery',
      'test:test',
    ]);
    expect(await db('merchants').where({ id: doc.merchant_id }).first()).toMatchObject({
      contact_email: 'ops@shop.example',
      test_merchant: true,
    });
  });

  it('create refuses a return host that is not a host name', async () => {
    expect(
      (await opsError('merchant', 'create', '--name', 'X', '--return-hosts', 'https://x.example/')).error.code,
    ).toBe('invalid_return_hosts');
  });

  it('suspend and unsuspend flip suspended', async () => {
    const merchantId = await newMerchant();
    expect(await ops('merchant', 'suspend', '--merchant', merchantId)).toEqual({
      merchant_id: merchantId,
      suspended: true,
    });
    expect(await ops('merchant', 'unsuspend', '--merchant', merchantId)).toEqual({
      merchant_id: merchantId,
      suspended: false,
    });
    expect((await db('merchants').where({ id: merchantId }).first()).suspended).toBe(false);
  });

  it('set-branding sets the display name, logo and accent the hosted page shows, and clears them', async () => {
    const merchantId = await newMerchant();
    expect(
      await ops(
        'merchant',
        'set-branding',
        '--merchant',
        merchantId,
        '--display-name',
        'Dar Al-Kutub',
        '--logo-url',
        'https://cdn.example.com/logo.png',
        '--accent',
        '#9A3412',
      ),
    ).toEqual({
      merchant_id: merchantId,
      display_name: 'Dar Al-Kutub',
      logo_url: 'https://cdn.example.com/logo.png',
      accent: '#9a3412',
    });
    expect(
      await ops('merchant', 'set-branding', '--merchant', merchantId, '--logo-url', '', '--accent', ''),
    ).toMatchObject({
      logo_url: null,
      accent: null,
    });
  });

  it('set-branding refuses an http logo, a named colour, and no change at all', async () => {
    const merchantId = await newMerchant();
    const brand = (...flags: string[]) => opsError('merchant', 'set-branding', '--merchant', merchantId, ...flags);
    expect((await brand('--logo-url', 'http://cdn.example.com/logo.png')).error.code).toBe('invalid_logo_url');
    expect((await brand('--accent', 'red')).error.code).toBe('invalid_accent');
    expect((await brand()).error.code).toBe('missing_flag');
  });

  it('an unknown merchant is merchant_not_found', async () => {
    expect((await opsError('merchant', 'suspend', '--merchant', 'mer_nope')).error.code).toBe('merchant_not_found');
  });
});

describe('checkout-key', () => {
  it('create defaults to every scope', async () => {
    const merchantId = await newMerchant();
    const doc = await ops('checkout-key', 'create', '--merchant', merchantId, '--mode', 'live', '--type', 'secret');
    expect(doc).toEqual({
      key: expect.stringMatching(/^svc_ck_live_/),
      key_id: expect.any(String),
      merchant_id: merchantId,
      mode: 'live',
      type: 'secret',
      scopes: [...checkoutScopes],
    });
  });

  it('refuses a live key without WEBHOOK_SECRET_KEY (webhook_secret_key_required); test keys need none', async () => {
    const merchantId = await newMerchant();
    const noKey = { ...deps, settings: { ...deps.settings, WEBHOOK_SECRET_KEY: undefined } };
    const argv = ['checkout-key', 'create', '--merchant', merchantId, '--type', 'secret', '--json'];
    const live = await run([...argv, '--mode', 'live'], noKey);
    expect(live.exitCode).toBe(1);
    expect(JSON.parse(live.stdout).error.code).toBe('webhook_secret_key_required');
    expect((await run([...argv, '--mode', 'test'], noKey)).exitCode).toBe(0);
  });

  it('create takes --scopes', async () => {
    const merchantId = await newMerchant();
    const doc = await ops(
      'checkout-key',
      'create',
      '--merchant',
      merchantId,
      '--mode',
      'test',
      '--type',
      'publishable',
      '--scopes',
      'sessions:read',
    );
    expect(doc).toMatchObject({ key: expect.stringMatching(/^svc_pk_test_/), scopes: ['sessions:read'] });
  });

  it('revoke sets revoked_at', async () => {
    const merchantId = await newMerchant();
    const key = await ops('checkout-key', 'create', '--merchant', merchantId, '--mode', 'test', '--type', 'secret');
    expect(await ops('checkout-key', 'revoke', '--key-id', key.key_id)).toEqual({
      key_id: key.key_id,
      revoked_at: expect.stringMatching(ISO_MS),
    });
  });

  it('create refuses an unknown type', async () => {
    const merchantId = await newMerchant();
    expect(
      (await opsError('checkout-key', 'create', '--merchant', merchantId, '--mode', 'test', '--type', 'admin')).error
        .code,
    ).toBe('invalid_flag');
  });
});

describe('method', () => {
  it('enable and disable upsert the merchant method', async () => {
    const merchantId = await newMerchant();
    expect(await ops('method', 'enable', '--merchant', merchantId, '--mode', 'live', '--code', 'card')).toEqual({
      merchant_id: merchantId,
      mode: 'live',
      code: 'card',
      enabled: true,
    });
    expect((await ops('method', 'disable', '--merchant', merchantId, '--mode', 'live', '--code', 'card')).enabled).toBe(
      false,
    );
    const rows = await db('merchant_methods').where({ merchant_id: merchantId });
    expect(rows).toEqual([expect.objectContaining({ mode: 'live', code: 'card', enabled: false })]);
  });

  it('the test method cannot be enabled in live mode', async () => {
    const merchantId = await newMerchant();
    expect(
      (await opsError('method', 'enable', '--merchant', merchantId, '--mode', 'live', '--code', 'test')).error.code,
    ).toBe('method_not_allowed');
  });

  it('refuses an unknown method code', async () => {
    const merchantId = await newMerchant();
    expect(
      (await opsError('method', 'enable', '--merchant', merchantId, '--mode', 'test', '--code', 'bitcoin')).error.code,
    ).toBe('unknown_method');
  });
});

describe('fx set', () => {
  it('sets and replaces a rate', async () => {
    expect(await ops('fx', 'set', '--from', 'xts', '--to', 'IQD', '--rate', '1310.5')).toEqual({
      from: 'XTS',
      to: 'IQD',
      rate: 1310.5,
      updated_at: expect.stringMatching(ISO_MS),
    });
    await ops('fx', 'set', '--from', 'XTS', '--to', 'IQD', '--rate', '1320');
    const row = await db('fx_rates').where({ from_currency: 'XTS', to_currency: 'IQD' }).first();
    expect(Number(row.rate)).toBe(1320);
  });

  it('refuses a rate that is not a positive number', async () => {
    for (const rate of ['0', '-1', 'abc']) {
      expect((await opsError('fx', 'set', '--from', 'XTS', '--to', 'IQD', '--rate', rate)).error.code).toBe(
        'invalid_rate',
      );
    }
  });
});

describe('outbox list', () => {
  it('masks the code of a sent SMS, shows an unsent one (test mode) in full, and a purged body as null', async () => {
    const to = `+96478${Date.now().toString().slice(-8)}`;
    await db('outbox').insert({
      kind: 'sms',
      to,
      body: 'Your code is 123456. It expires in 10 minutes.',
      sent_at: new Date(),
    });
    await db('outbox').insert({
      kind: 'sms',
      to,
      body: 'Your code is 654321.',
      test_mode: true,
      next_attempt_at: null,
    });
    await db('outbox').insert({ kind: 'sms', to, body: null, sent_at: new Date() });
    const mine = (await ops('outbox', 'list', '--kind', 'sms', '--limit', '100')).messages.filter(
      (m: { to: string }) => m.to === to,
    );
    expect(mine.map((m: { body: string | null; test_mode: boolean }) => [m.body, m.test_mode])).toEqual([
      [null, false],
      ['Your code is 654321.', true],
      ['Your code is ******. It expires in 10 minutes.', false],
    ]);
  });

  it('lists messages newest first, filtered by kind and limited', async () => {
    const to = `+96477${Date.now().toString().slice(-8)}`;
    await db('outbox').insert({ kind: 'sms', to, body: 'Your code is 111111' });
    await db('outbox').insert({ kind: 'email', to: 'a@shop.example', subject: 'Hi', body: 'Hello' });
    await db('outbox').insert({ kind: 'sms', to, body: 'Your code is 222222' });

    const sms = await ops('outbox', 'list', '--kind', 'sms', '--limit', '100');
    const mine = sms.messages.filter((m: { to: string }) => m.to === to);
    expect(mine).toEqual([
      {
        id: expect.any(Number),
        kind: 'sms',
        to,
        subject: null,
        body: 'Your code is 222222',
        created_at: expect.stringMatching(ISO_MS),
        sent_at: null,
        attempts: 0,
        last_error: null,
        next_attempt_at: expect.stringMatching(ISO_MS),
        test_mode: false,
      },
      {
        id: expect.any(Number),
        kind: 'sms',
        to,
        subject: null,
        body: 'Your code is 111111',
        created_at: expect.stringMatching(ISO_MS),
        sent_at: null,
        attempts: 0,
        last_error: null,
        next_attempt_at: expect.stringMatching(ISO_MS),
        test_mode: false,
      },
    ]);
    expect(sms.messages.every((m: { kind: string }) => m.kind === 'sms')).toBe(true);
    expect(mine.every((m: { test_mode: boolean }) => m.test_mode === false)).toBe(true);
    expect((await ops('outbox', 'list', '--limit', '1')).messages).toHaveLength(1);
  });

  it('shows what the relay did: sent, or failed and when it tries next', async () => {
    const to = `ops-relay-${Date.now()}@shop.example`;
    const sentAt = new Date('2026-11-21T10:00:00.000Z');
    await db('outbox').insert({
      kind: 'email',
      to,
      subject: 'A',
      body: 'a',
      sent_at: sentAt,
      attempts: 1,
      next_attempt_at: null,
    });
    await db('outbox').insert({ kind: 'email', to, subject: 'B', body: 'b', attempts: 2, last_error: 'smtp 451' });
    const mine = (await ops('outbox', 'list', '--kind', 'email', '--limit', '1000')).messages.filter(
      (m: { to: string }) => m.to === to,
    );
    expect(mine.map((m: Record<string, unknown>) => [m.subject, m.sent_at, m.attempts, m.last_error])).toEqual([
      ['B', null, 2, 'smtp 451'],
      ['A', '2026-11-21T10:00:00.000Z', 1, null],
    ]);
  });

  it('refuses an unknown kind', async () => {
    expect((await opsError('outbox', 'list', '--kind', 'fax')).error.code).toBe('invalid_kind');
  });
});

describe('demo', () => {
  it('creates a seller, a test merchant, their keys and the URLs to try', async () => {
    const doc = await ops('demo');
    expect(doc).toMatchObject({
      seller_id: expect.stringMatching(/^sel_/),
      partner_key: expect.stringMatching(/^svc_sk_test_/),
      merchant_id: expect.stringMatching(/^mer_/),
      secret_key: expect.stringMatching(/^svc_ck_test_/),
      publishable_key: expect.stringMatching(/^svc_pk_test_/),
      urls: {
        api_base: 'http://api.test:4000',
        partner_health: 'http://api.test:4000/partner/v1/health',
        partner_products: 'http://api.test:4000/partner/v1/products',
        checkout_payment_methods: 'http://api.test:4000/v1/payment_methods',
        temporal_ui: 'http://localhost:8233',
      },
    });
    const key = await db('partner_keys')
      .where({ id: parseKey(doc.partner_key)!.keyId })
      .first();
    expect(key).toMatchObject({ seller_id: doc.seller_id, env: 'test', scopes: [...partnerScopes] });
    expect(await db('merchants').where({ id: doc.merchant_id }).first()).toMatchObject({
      display_name: 'Demo Store',
      test_merchant: true,
    });
    const hosts = await db('merchant_return_hosts').where({ merchant_id: doc.merchant_id }).pluck('host');
    expect(hosts.sort()).toEqual(['*.example.com', 'example.com', 'localhost']);
    const products = await db('products').where({ seller_id: doc.seller_id });
    expect(products.length).toBeGreaterThanOrEqual(2);
    expect(await db('stock_locations').where({ seller_id: doc.seller_id })).toHaveLength(1);
    // One console owner per demo account, who can sign in with the printed password.
    expect(doc.console.url).toBe('http://api.test:4000/console/sign-in');
    expect(doc.console.seller_owner.totp_secret).toMatch(/^[A-Z2-7]{32}$/);
    const sellerOwner = await checkPassword(db, doc.console.seller_owner.email, doc.console.seller_owner.password);
    const merchantOwner = await checkPassword(
      db,
      doc.console.merchant_owner.email,
      doc.console.merchant_owner.password,
    );
    expect(sellerOwner).toMatchObject({ role: 'owner', seller_id: doc.seller_id, merchant_id: null });
    expect(merchantOwner).toMatchObject({ role: 'owner', seller_id: null, merchant_id: doc.merchant_id });
  });
});

describe('console-user invite', () => {
  it('prints a one-time link of which only the hash is stored', async () => {
    const seller = await ops('seller', 'create', '--name', 'Invited');
    const email = `owner-${Date.now()}@invited.example`;
    const doc = await ops('console-user', 'invite', '--seller', seller.seller_id, '--email', email, '--role', 'owner');
    expect(doc).toMatchObject({
      email,
      role: 'owner',
      seller_id: seller.seller_id,
      link: expect.stringMatching(/^http:\/\/api\.test:4000\/console\/invite\/[A-Za-z0-9_-]{43}$/),
    });
    const row = await db('console_invites').where({ id: doc.invite_id }).first();
    expect(row.token_hash).toBe(tokenHash(doc.link.split('/').at(-1)));
    expect(new Date(row.expires_at).getTime() - new Date(row.created_at).getTime()).toBe(7 * 86_400_000);
  });

  it('refuses no tenant or both, an unknown tenant or role, and an e-mail already used', async () => {
    const seller = await ops('seller', 'create', '--name', 'Invited');
    const invite = (...flags: string[]) => opsError('console-user', 'invite', '--email', 'x@y.example', ...flags);
    expect((await invite('--role', 'owner')).error.code).toBe('invalid_tenant');
    expect((await invite('--role', 'owner', '--seller', seller.seller_id, '--merchant', 'mer_x')).error.code).toBe(
      'invalid_tenant',
    );
    expect((await invite('--role', 'owner', '--seller', 'sel_nope')).error.code).toBe('seller_not_found');
    expect((await invite('--role', 'owner', '--merchant', 'mer_nope')).error.code).toBe('merchant_not_found');
    expect((await invite('--role', 'admin', '--seller', seller.seller_id)).error.code).toBe('invalid_flag');
    const demo = await ops('demo');
    const taken = await opsError(
      'console-user',
      'invite',
      '--seller',
      seller.seller_id,
      '--email',
      demo.console.seller_owner.email,
      '--role',
      'viewer',
    );
    expect(taken.error.code).toBe('email_taken');
  });
});

describe('as a subprocess', () => {
  it('npm run -s ops -- seller create --json prints exactly one JSON document', async () => {
    const { stdout } = await promisify(execFile)(
      'npm',
      ['run', '-s', 'ops', '--', 'seller', 'create', '--name', 'X', '--json'],
      {
        cwd: `${__dirname}/../..`,
        env: { ...process.env, DATABASE_URL: databaseUrl },
      },
    );
    const doc = JSON.parse(stdout);
    expect(doc).toMatchObject({ seller_id: expect.stringMatching(/^sel_/), name: 'X' });
    expect(stdout).toBe(`${JSON.stringify(doc, null, 2)}\n`);
  });
});

describe('status', () => {
  it('prints the dependencies as it reaches them, its clock skew, the backlogs, failing endpoints, sessions in payment and Temporal state as one document', async () => {
    // A database of its own, so the figures are exact.
    const own = await ownDatabase();
    try {
      await own.db('outbox').insert({
        kind: 'email',
        to: 'ops@shop.example.com',
        body: 'x',
        created_at: new Date(Date.now() - 7_200_000),
      });
      const result = await run(['status', '--json'], { ...deps, db: own.db });
      expect(result.exitCode).toBe(0);
      const doc = JSON.parse(result.stdout);
      expect(doc).toEqual({
        dependencies: [
          {
            dependency: 'postgres',
            ok: true,
            ms: expect.any(Number),
            deadline: `DB_QUERY_TIMEOUT_MS ${deps.settings.DB_QUERY_TIMEOUT_MS} ms`,
            detail: null,
          },
          {
            dependency: 'temporal',
            ok: false,
            ms: 0,
            deadline: `TEMPORAL_CALL_TIMEOUT_MS ${deps.settings.TEMPORAL_CALL_TIMEOUT_MS} ms`,
            detail: 'no Temporal connection',
          },
        ],
        clock_skew_seconds: expect.any(Number),
        processes: [],
        backlogs: {
          webhook_deliveries_pending: 0,
          webhook_oldest_due_delivery_age_seconds: 0,
          handoffs_pending: 0,
          handoff_oldest_age_seconds: 0,
          outbox: {
            sms: { pending: 0, oldest_pending_age_seconds: 0 },
            email: { pending: 1, oldest_pending_age_seconds: expect.any(Number) },
          },
        },
        webhook_endpoints: { failing: 0, disabled: 0 },
        sessions_processing: 0,
        temporal: {
          reachable: false,
          namespace: 'default',
          missing_search_attributes: null,
          error: 'no Temporal connection',
        },
      });
      expect(doc.backlogs.outbox.email.oldest_pending_age_seconds).toBeGreaterThanOrEqual(7200);
      const text = await run(['status'], { ...deps, db: own.db });
      expect(text.exitCode).toBe(0);
      expect(Math.abs(doc.clock_skew_seconds)).toBeLessThan(1);
      expect(text.stdout).toMatch(/^dependencies:\n {2}dependency +ok +ms +deadline +detail\n {2}postgres +true /);
      expect(text.stdout).toMatch(/\nbacklogs:\n {2}webhook_deliveries_pending +0\n/);
    } finally {
      await own.drop();
    }
  });
});

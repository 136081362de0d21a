import { bulkUpsertProducts } from '../../src/partner/bulk-upsert';
import { BULK_PRODUCT_ROWS } from '../../src/partner/schemas';
import { log } from '../../src/lib/log';
import { buildSeller } from '../helpers/factories';
import { call } from '../helpers/http';
import { idemKey, ops, partnerClient, seedProducts, uniqueSku, catalogProduct } from '../helpers/partner';
import { startStack, Stack } from '../helpers/stack';

/** POST /products/bulk: create and update by SKU, row results, check order, idempotency, rate limit. */

// The real service, wrapped so one test can make it fail after it has written (a stored 500).
jest.mock('../../src/partner/bulk-upsert', () => {
  const actual = jest.requireActual('../../src/partner/bulk-upsert');
  return { ...actual, bulkUpsertProducts: jest.fn(actual.bulkUpsertProducts) };
});
const upsertMock = bulkUpsertProducts as jest.MockedFunction<typeof bulkUpsertProducts>;
const realUpsert: typeof bulkUpsertProducts = jest.requireActual('../../src/partner/bulk-upsert').bulkUpsertProducts;

const FAILING_TITLE = 'explode-on-insert';

let stack: Stack;
let catalogOnly: string;
let plain: string;
beforeAll(async () => {
  stack = await startStack();
  catalogOnly = (await ops(stack.db, 'category', 'create', '--name', 'Phones', '--catalog-only')).category_id;
  plain = (await ops(stack.db, 'category', 'create', '--name', 'Kitchen')).category_id;
  // A database failure inside one row, for the internal_error row code; it fires for this title only.
  await stack.db.raw(`
    CREATE OR REPLACE FUNCTION test_fail_product_insert() RETURNS trigger AS $$
    BEGIN IF NEW.title = '${FAILING_TITLE}' THEN RAISE EXCEPTION 'injected failure'; END IF; RETURN NEW; END $$
    LANGUAGE plpgsql;
    DROP TRIGGER IF EXISTS test_fail_product_insert ON products;
    CREATE TRIGGER test_fail_product_insert BEFORE INSERT ON products
      FOR EACH ROW EXECUTE FUNCTION test_fail_product_insert();`);
});
afterAll(async () => {
  await stack.db.raw('DROP TRIGGER IF EXISTS test_fail_product_insert ON products');
  await stack.stop();
});

async function seller(opts: Parameters<typeof buildSeller>[1] = {}) {
  const s = await buildSeller(stack.db, opts);
  return { ...s, api: partnerClient(stack.baseUrl, s.key) };
}

async function product(sellerId: string, sku: string) {
  return stack
    .db('products as p')
    .join('variants as v', 'v.product_id', 'p.id')
    .where({ 'v.seller_id': sellerId, 'v.sku': sku })
    .orderBy('p.id')
    .first('p.*');
}

const rowError = (code: string) => ({ code, message: expect.any(String) });

describe('POST /products/bulk: creating', () => {
  it('creates a draft product with one Default variant carrying the SKU and price', async () => {
    const s = await seller();
    const sku = uniqueSku();
    const res = await s.api.bulkProducts({
      items: [
        { external_sku: sku, title: 'Tea 500 g', price_iqd: 6000, description: 'Black tea', category_ids: [plain] },
      ],
    });
    expect(res.status).toBe(200);
    expect(res.body).toEqual({
      results: [{ external_sku: sku, status: 'accepted', product_id: expect.stringMatching(/^prod_/) }],
    });
    const read = await s.api.get(`/products/${sku}`);
    expect(read.body).toMatchObject({
      id: res.body.results[0].product_id,
      title: 'Tea 500 g',
      description: 'Black tea',
      status: 'draft',
      category_ids: [plain],
      catalog_managed: false,
      variants: [{ sku, price: 6000, options: { Default: 'Default' }, stocked_quantity: 0 }],
    });
  });

  it('puts initial_stock at the seller’s first stock location (default 0)', async () => {
    const s = await seller({ locations: 2 });
    const [withStock, without] = [uniqueSku(), uniqueSku()];
    await s.api.bulkProducts({
      items: [
        { external_sku: withStock, title: 'A', price_iqd: 1, initial_stock: 12 },
        { external_sku: without, title: 'B', price_iqd: 1 },
      ],
    });
    const levels = await stack
      .db('stock_levels as sl')
      .join('variants as v', 'v.id', 'sl.variant_id')
      .whereIn('v.sku', [withStock, without])
      .select('v.sku', 'sl.location_id', 'sl.level');
    expect(levels.map((l) => [l.sku, l.location_id, Number(l.level)]).sort()).toEqual(
      [
        [withStock, s.locations[0].id, 12],
        [without, s.locations[0].id, 0],
      ].sort(),
    );
  });

  it('rejects a create without title or without price_iqd as a row (validation_error), not the request', async () => {
    const s = await seller();
    const [a, b, c] = [uniqueSku(), uniqueSku(), uniqueSku()];
    const res = await s.api.bulkProducts({
      items: [
        { external_sku: a, price_iqd: 100 },
        { external_sku: b, title: 'No price' },
        { external_sku: c, title: '   ', price_iqd: 100 },
      ],
    });
    expect(res.status).toBe(200);
    expect(res.body.results).toEqual([
      { external_sku: a, status: 'rejected', error: rowError('validation_error') },
      { external_sku: b, status: 'rejected', error: rowError('validation_error') },
      { external_sku: c, status: 'rejected', error: rowError('validation_error') },
    ]);
    expect(await product(s.seller_id, a)).toBeUndefined();
  });

  it.each([
    ['a negative price_iqd', { price_iqd: -1 }],
    ['a fractional price_iqd', { price_iqd: 10.5 }],
    ['a negative initial_stock', { price_iqd: 100, initial_stock: -3 }],
    ['a fractional initial_stock', { price_iqd: 100, initial_stock: 1.5 }],
  ])('rejects a create with %s (validation_error) and writes nothing', async (_label, fields) => {
    const s = await seller();
    const sku = uniqueSku();
    const res = await s.api.bulkProducts({ items: [{ external_sku: sku, title: 'X', ...fields }] });
    expect(res.body.results).toEqual([{ external_sku: sku, status: 'rejected', error: rowError('validation_error') }]);
    expect(await product(s.seller_id, sku)).toBeUndefined();
  });

  it('accepts a price_iqd of 0', async () => {
    const s = await seller();
    const sku = uniqueSku();
    const res = await s.api.bulkProducts({ items: [{ external_sku: sku, title: 'Free sample', price_iqd: 0 }] });
    expect(res.body.results[0].status).toBe('accepted');
  });

  it('rejects a row that is not an object, or whose external_sku is missing or blank, with external_sku null', async () => {
    const s = await seller();
    const res = await s.api.bulkProducts({
      items: [
        'SKU-1',
        7,
        null,
        [],
        { title: 'No SKU', price_iqd: 1 },
        { external_sku: '  ', title: 'Blank', price_iqd: 1 },
        { external_sku: 42 },
      ],
    });
    expect(res.status).toBe(200);
    expect(res.body.results).toEqual(
      Array.from({ length: 7 }, () => ({
        external_sku: null,
        status: 'rejected',
        error: rowError('validation_error'),
      })),
    );
  });

  it('rejects text no product can hold (U+0000, a lone surrogate) as a row, and stores the outcome', async () => {
    const s = await seller();
    const sku = uniqueSku();
    const key = idemKey();
    const body = {
      items: [
        { external_sku: 'A\u0000B', title: 'T', price_iqd: 1 },
        { external_sku: sku, title: 'T\ud800', price_iqd: 1 },
        { external_sku: sku, title: 'T', price_iqd: 1, description: 'x\u0000' },
        { external_sku: sku, title: 'T', price_iqd: 1, category_ids: ['cat\u0000'] },
      ],
    };
    const res = await s.api.bulkProducts(body, key);
    expect(res.status).toBe(200);
    expect(res.body.results).toEqual([
      { external_sku: null, status: 'rejected', error: rowError('validation_error') },
      { external_sku: sku, status: 'rejected', error: rowError('validation_error') },
      { external_sku: sku, status: 'rejected', error: rowError('validation_error') },
      { external_sku: sku, status: 'rejected', error: rowError('validation_error') },
    ]);
    expect((await s.api.bulkProducts(body, key)).headers.get('idempotent-replayed')).toBe('true');
  });

  it('rejects a category that accepts only catalog products (catalog_only_category)', async () => {
    const s = await seller();
    const sku = uniqueSku();
    const res = await s.api.bulkProducts({
      items: [{ external_sku: sku, title: 'Phone', price_iqd: 1, category_ids: [catalogOnly] }],
    });
    expect(res.body.results).toEqual([
      { external_sku: sku, status: 'rejected', error: rowError('catalog_only_category') },
    ]);
    expect(await product(s.seller_id, sku)).toBeUndefined();
  });

  it('rejects an unknown category id as a row (validation_error)', async () => {
    const s = await seller();
    const sku = uniqueSku();
    const res = await s.api.bulkProducts({
      items: [{ external_sku: sku, title: 'X', price_iqd: 1, category_ids: ['cat_nope'] }],
    });
    expect(res.body.results).toEqual([{ external_sku: sku, status: 'rejected', error: rowError('validation_error') }]);
  });

  it('rejects initial_stock above 0 for a seller without a stock location (inventory_item_not_found), and creates with 0', async () => {
    const s = await seller({ locations: 0 });
    const [a, b] = [uniqueSku(), uniqueSku()];
    const res = await s.api.bulkProducts({
      items: [
        { external_sku: a, title: 'A', price_iqd: 1, initial_stock: 5 },
        { external_sku: b, title: 'B', price_iqd: 1 },
      ],
    });
    expect(res.body.results).toEqual([
      { external_sku: a, status: 'rejected', error: rowError('inventory_item_not_found') },
      { external_sku: b, status: 'accepted', product_id: expect.any(String) },
    ]);
  });

  it('drops a field of the wrong JSON type instead of rejecting the row', async () => {
    const s = await seller();
    const sku = uniqueSku();
    const res = await s.api.bulkProducts({
      items: [
        {
          external_sku: sku,
          title: 'Typed',
          price_iqd: 500,
          description: 12,
          category_ids: 'cat_x',
          initial_stock: '9',
        },
      ],
    });
    expect(res.body.results[0].status).toBe('accepted');
    const read = await s.api.get(`/products/${sku}`);
    expect(read.body).toMatchObject({ description: '', category_ids: [], variants: [{ stocked_quantity: 0 }] });
  });

  it('reports a row the database fails on as internal_error, and still runs the other rows', async () => {
    const s = await seller();
    const [bad, good] = [uniqueSku(), uniqueSku()];
    const errors = jest.spyOn(log, 'error');
    const res = await s.api.bulkProducts({
      items: [
        { external_sku: bad, title: FAILING_TITLE, price_iqd: 1 },
        { external_sku: good, title: 'Fine', price_iqd: 1 },
      ],
    });
    expect(res.status).toBe(200);
    expect(res.body.results).toEqual([
      { external_sku: bad, status: 'rejected', error: rowError('internal_error') },
      { external_sku: good, status: 'accepted', product_id: expect.any(String) },
    ]);
    expect(await product(s.seller_id, bad)).toBeUndefined();
    // The batch wrote nothing and the rows were redone one by one, the bad one failing alone.
    expect(errors.mock.calls.map(([message]) => message)).toEqual([
      'bulk upsert batch failed',
      'bulk upsert row failed',
    ]);
    errors.mockRestore();
  });

  it('never publishes a product', async () => {
    const s = await seller();
    const sku = uniqueSku();
    await s.api.bulkProducts({ items: [{ external_sku: sku, title: 'X', price_iqd: 1 }] });
    await s.api.bulkProducts({ items: [{ external_sku: sku, title: 'Y' }] });
    expect((await product(s.seller_id, sku)).status).toBe('draft');
  });
});

describe('POST /products/bulk: updating', () => {
  it('applies only title, description and category_ids; price_iqd and initial_stock are ignored', async () => {
    const s = await seller();
    const sku = uniqueSku();
    const created = await s.api.bulkProducts({
      items: [
        {
          external_sku: sku,
          title: 'Old',
          price_iqd: 1000,
          description: 'old',
          category_ids: [plain],
          initial_stock: 3,
        },
      ],
    });
    const other = (await ops(stack.db, 'category', 'create', '--name', 'Garden')).category_id;
    const res = await s.api.bulkProducts({
      items: [
        {
          external_sku: sku,
          title: 'New',
          price_iqd: 99999,
          description: 'new',
          category_ids: [other],
          initial_stock: 50,
        },
      ],
    });
    expect(res.body.results).toEqual([
      { external_sku: sku, status: 'accepted', product_id: created.body.results[0].product_id },
    ]);
    const read = await s.api.get(`/products/${sku}`);
    expect(read.body).toMatchObject({
      title: 'New',
      description: 'new',
      category_ids: [other],
      variants: [{ price: 1000, stocked_quantity: 3 }],
    });
  });

  it('keeps fields the update row leaves out, and clears categories with an empty category_ids', async () => {
    const s = await seller();
    const sku = uniqueSku();
    await s.api.bulkProducts({
      items: [{ external_sku: sku, title: 'Keep', price_iqd: 1, description: 'd', category_ids: [plain] }],
    });
    await s.api.bulkProducts({ items: [{ external_sku: sku, description: 'd2' }] });
    expect((await s.api.get(`/products/${sku}`)).body).toMatchObject({
      title: 'Keep',
      description: 'd2',
      category_ids: [plain],
    });
    await s.api.bulkProducts({ items: [{ external_sku: sku, category_ids: [] }] });
    expect((await s.api.get(`/products/${sku}`)).body.category_ids).toEqual([]);
  });

  it('moves a published product to proposed on update, even when nothing changed', async () => {
    const s = await seller();
    const sku = uniqueSku();
    const id = (await s.api.bulkProducts({ items: [{ external_sku: sku, title: 'X', price_iqd: 1 }] })).body.results[0]
      .product_id;
    await ops(stack.db, 'product', 'submit', '--product', id);
    await ops(stack.db, 'product', 'approve', '--product', id);
    const res = await s.api.bulkProducts({ items: [{ external_sku: sku }] });
    expect(res.body.results[0]).toEqual({ external_sku: sku, status: 'accepted', product_id: id });
    expect((await s.api.get(`/products/${sku}`)).body.status).toBe('proposed');
  });

  it('leaves a draft, proposed or rejected product in its status on update', async () => {
    const s = await seller();
    const skus = [uniqueSku(), uniqueSku(), uniqueSku()];
    const res = await s.api.bulkProducts({
      items: skus.map((sku) => ({ external_sku: sku, title: 'X', price_iqd: 1 })),
    });
    const [, proposed, rejected] = res.body.results.map((r: any) => r.product_id);
    await ops(stack.db, 'product', 'submit', '--product', proposed);
    await ops(stack.db, 'product', 'submit', '--product', rejected);
    await ops(stack.db, 'product', 'reject', '--product', rejected, '--reason', 'Blurry');
    await s.api.bulkProducts({ items: skus.map((sku) => ({ external_sku: sku, title: 'Y' })) });
    const statuses = await Promise.all(skus.map(async (sku) => (await s.api.get(`/products/${sku}`)).body));
    expect(statuses.map((p) => [p.status, p.rejection_reason])).toEqual([
      ['draft', null],
      ['proposed', null],
      ['rejected', 'Blurry'],
    ]);
  });

  it('rejects an update of a catalog-managed product with catalog_product_locked and changes nothing', async () => {
    const s = await seller();
    const sku = uniqueSku();
    await catalogProduct(stack.db, s.seller_id, sku, 'Galaxy', '500000');
    const res = await s.api.bulkProducts({ items: [{ external_sku: sku, title: 'My Galaxy' }] });
    expect(res.body.results).toEqual([
      { external_sku: sku, status: 'rejected', error: rowError('catalog_product_locked') },
    ]);
    expect((await product(s.seller_id, sku)).title).toBe('Galaxy');
  });

  it('rejects an update to a catalog-only category (catalog_only_category) and an unknown one (validation_error)', async () => {
    const s = await seller();
    const sku = uniqueSku();
    await s.api.bulkProducts({ items: [{ external_sku: sku, title: 'X', price_iqd: 1 }] });
    const res = await s.api.bulkProducts({
      items: [
        { external_sku: sku, category_ids: [catalogOnly] },
        { external_sku: sku, category_ids: ['cat_unknown'] },
      ],
    });
    expect(res.body.results.map((r: any) => r.error.code)).toEqual(['catalog_only_category', 'validation_error']);
  });

  it('rejects an update with a blank title (validation_error)', async () => {
    const s = await seller();
    const sku = uniqueSku();
    await s.api.bulkProducts({ items: [{ external_sku: sku, title: 'X', price_iqd: 1 }] });
    const res = await s.api.bulkProducts({ items: [{ external_sku: sku, title: ' ' }] });
    expect(res.body.results[0].error.code).toBe('validation_error');
    expect((await product(s.seller_id, sku)).title).toBe('X');
  });

  it('updates the first (oldest) product when the SKU is reused on two products', async () => {
    const s = await seller();
    const prefix = uniqueSku('REUSED');
    const [older] = await seedProducts(stack.db, s.seller_id, 1, { prefix });
    const [newer] = await seedProducts(stack.db, s.seller_id, 1, { prefix });
    const res = await s.api.bulkProducts({ items: [{ external_sku: older.sku, title: 'Renamed' }] });
    expect(res.body.results[0]).toMatchObject({ status: 'accepted', product_id: older.id });
    const titles = await stack.db('products').whereIn('id', [older.id, newer.id]).orderBy('id').pluck('title');
    expect(titles).toEqual(['Renamed', 'Seeded product 1']);
  });

  it('updates a product through either of its two SKUs', async () => {
    const s = await seller();
    const sku = uniqueSku();
    const id = (await s.api.bulkProducts({ items: [{ external_sku: sku, title: 'X', price_iqd: 1 }] })).body.results[0]
      .product_id;
    const second = uniqueSku('B');
    await ops(
      stack.db,
      'product',
      'add-variant',
      '--product',
      id,
      '--sku',
      second,
      '--price',
      '2',
      '--option',
      'Size=L',
    );
    const res = await s.api.bulkProducts({ items: [{ external_sku: second, title: 'Via second SKU' }] });
    expect(res.body.results[0]).toMatchObject({ status: 'accepted', product_id: id });
    expect((await s.api.get(`/products/${sku}`)).body.title).toBe('Via second SKU');
  });

  it('updates only the calling seller’s product: the same SKU at another seller is a separate product', async () => {
    const a = await seller();
    const b = await seller();
    const sku = uniqueSku();
    const theirs = (await b.api.bulkProducts({ items: [{ external_sku: sku, title: 'Theirs', price_iqd: 1 }] })).body
      .results[0];
    const mine = (await a.api.bulkProducts({ items: [{ external_sku: sku, title: 'Mine', price_iqd: 2 }] })).body
      .results[0];
    expect(mine.product_id).not.toBe(theirs.product_id);
    expect((await b.api.get(`/products/${sku}`)).body.title).toBe('Theirs');
  });
});

describe('POST /products/bulk: batches', () => {
  it('answers a 50-row batch of mixed good and bad rows row by row, in request order', async () => {
    const s = await seller();
    const errors = jest.spyOn(log, 'error');
    const locked = uniqueSku('LOCKED');
    await catalogProduct(stack.db, s.seller_id, locked, 'Cat', '1');
    const existing = uniqueSku('EXISTING');
    await s.api.bulkProducts({ items: [{ external_sku: existing, title: 'Before', price_iqd: 1 }] });

    const kinds = [
      'create',
      'update',
      'no_title',
      'no_price',
      'not_object',
      'blank_sku',
      'catalog_only',
      'locked',
      'unknown_category',
      'negative_price',
    ];
    const items: unknown[] = [];
    const expected: unknown[] = [];
    for (let i = 0; i < 50; i++) {
      const kind = kinds[i % kinds.length];
      const sku = `${uniqueSku('MIX')}-${i}`;
      const reject = (code: string, s: string | null = sku) => ({
        external_sku: s,
        status: 'rejected',
        error: rowError(code),
      });
      const accept = (s: string) => ({
        external_sku: s,
        status: 'accepted',
        product_id: expect.stringMatching(/^prod_/),
      });
      if (kind === 'create')
        [items[i], expected[i]] = [{ external_sku: sku, title: `P${i}`, price_iqd: i }, accept(sku)];
      if (kind === 'update')
        [items[i], expected[i]] = [
          { external_sku: i === 1 ? existing : sku, title: `U${i}`, price_iqd: 1 },
          accept(i === 1 ? existing : sku),
        ];
      if (kind === 'no_title')
        [items[i], expected[i]] = [{ external_sku: sku, price_iqd: 1 }, reject('validation_error')];
      if (kind === 'no_price')
        [items[i], expected[i]] = [{ external_sku: sku, title: 'T' }, reject('validation_error')];
      if (kind === 'not_object') [items[i], expected[i]] = [sku, reject('validation_error', null)];
      if (kind === 'blank_sku')
        [items[i], expected[i]] = [{ external_sku: '', title: 'T', price_iqd: 1 }, reject('validation_error', null)];
      if (kind === 'catalog_only')
        [items[i], expected[i]] = [
          { external_sku: sku, title: 'T', price_iqd: 1, category_ids: [catalogOnly] },
          reject('catalog_only_category'),
        ];
      if (kind === 'locked')
        [items[i], expected[i]] = [
          { external_sku: i === 7 ? locked : sku, title: 'T', price_iqd: 1 },
          i === 7 ? reject('catalog_product_locked', locked) : accept(sku),
        ];
      if (kind === 'unknown_category')
        [items[i], expected[i]] = [
          { external_sku: sku, title: 'T', price_iqd: 1, category_ids: ['cat_none'] },
          reject('validation_error'),
        ];
      if (kind === 'negative_price')
        [items[i], expected[i]] = [{ external_sku: sku, title: 'T', price_iqd: -5 }, reject('validation_error')];
    }
    expect(items).toHaveLength(BULK_PRODUCT_ROWS);
    const res = await s.api.bulkProducts({ items });
    expect(res.status).toBe(200);
    expect(res.body.results).toEqual(expected);
    expect((await product(s.seller_id, existing)).title).toBe('U1');
    // The rows with a SKU of their own went together: nothing failed and nothing was redone.
    expect(errors).not.toHaveBeenCalled();
    errors.mockRestore();
  });

  it('answers 200 with results even when every row is rejected', async () => {
    const s = await seller();
    const res = await s.api.bulkProducts({ items: [1, 2, 3] });
    expect(res.status).toBe(200);
    expect(res.body.results.map((r: any) => r.status)).toEqual(['rejected', 'rejected', 'rejected']);
  });

  it('runs rows repeating a SKU one after another in request order: one product, the later row an update', async () => {
    const s = await seller();
    const sku = uniqueSku();
    const res = await s.api.bulkProducts({
      items: [
        { external_sku: sku, title: 'First', price_iqd: 100 },
        { external_sku: uniqueSku(), title: 'Other', price_iqd: 1 },
        { external_sku: sku, title: 'Second', price_iqd: 200 },
      ],
    });
    const [first, , second] = res.body.results;
    expect(first).toMatchObject({ status: 'accepted' });
    expect(second).toEqual({ external_sku: sku, status: 'accepted', product_id: first.product_id });
    const count = await stack.db('variants').where({ seller_id: s.seller_id, sku }).count({ n: '*' });
    expect(Number(count[0].n)).toBe(1);
    expect((await s.api.get(`/products/${sku}`)).body).toMatchObject({ title: 'Second', variants: [{ price: 100 }] });
  });

  it('makes one product when concurrent requests create the same new SKU', async () => {
    const s = await seller();
    const sku = uniqueSku();
    const results = await Promise.all(
      Array.from({ length: 8 }, (_, i) =>
        s.api.bulkProducts({ items: [{ external_sku: sku, title: `T${i}`, price_iqd: 1 }] }),
      ),
    );
    const productIds = new Set(results.map((r) => r.body.results[0].product_id));
    expect(productIds.size).toBe(1);
    const count = await stack.db('variants').where({ seller_id: s.seller_id, sku }).count({ n: '*' });
    expect(Number(count[0].n)).toBe(1);
  });

  it.each([
    ['items missing', 'missing', {}],
    ['items not an array', 'missing', { items: { external_sku: 'A' } }],
    ['items empty', 'missing', { items: [] }],
    ['a body that is not an object', 'missing', [{ external_sku: 'A' }]],
    [
      '51 rows (the cap + 1)',
      'too_many',
      { items: Array.from({ length: 51 }, (_, i) => ({ external_sku: `S${i}`, title: 'T', price_iqd: 1 })) },
    ],
  ])('refuses %s with a top-level 400 validation_error (issue %s) and writes nothing', async (_label, issue, body) => {
    const s = await seller();
    const res = await s.api.bulkProducts(body);
    expect(res.status).toBe(400);
    expect(res.body.error).toEqual({
      code: 'validation_error',
      message: expect.any(String),
      details: [{ field: 'items', issue }],
      request_id: expect.any(String),
    });
    expect(await stack.db('products').where({ seller_id: s.seller_id }).first()).toBeUndefined();
  });

  it('refuses a request without a body as items missing', async () => {
    const s = await seller();
    const res = await call(stack.baseUrl, 'POST', '/partner/v1/products/bulk', {
      key: s.key,
      idempotencyKey: idemKey(),
    });
    expect(res.status).toBe(400);
    expect(res.body.error.details).toEqual([{ field: 'items', issue: 'missing' }]);
  });
});

describe('POST /products/bulk: check order (key, scope, Idempotency-Key, stored outcome, rate limit, body, rows)', () => {
  beforeEach(() => stack.clock.freeze(new Date(Math.ceil(Date.now() / 600_000) * 600_000 + 5_000)));
  afterEach(() => stack.clock.unfreeze());

  it('refuses malformed JSON in the framework shape ({message, type}) before the handler runs', async () => {
    const s = await seller();
    const res = await call(stack.baseUrl, 'POST', '/partner/v1/products/bulk', {
      key: s.key,
      idempotencyKey: idemKey(),
      rawBody: '{"items": [{"external_sku": "A"',
    });
    expect(res.status).toBe(400);
    expect(res.body).toEqual({ message: expect.any(String), type: 'entity.parse.failed' });
  });

  it('refuses a live key in the sandbox with 401 api_key_wrong_environment', async () => {
    const live = await seller({ env: 'live' });
    const res = await live.api.bulkProducts({ items: [] });
    expect(res.status).toBe(401);
    expect(res.body.error.code).toBe('api_key_wrong_environment');
  });

  it('checks the key before the scope, the Idempotency-Key and the body', async () => {
    const res = await call(stack.baseUrl, 'POST', '/partner/v1/products/bulk', { key: 'svc_sk_test_bogus', body: {} });
    expect(res.status).toBe(401);
    expect(res.body.error.code).toBe('invalid_api_key');
  });

  it('checks the scope (catalog:write) before the Idempotency-Key and the body', async () => {
    const s = await seller({ scopes: ['catalog:read', 'inventory:write'] });
    const res = await s.api.bulkProducts({}, null);
    expect(res.status).toBe(403);
    expect(res.body.error).toMatchObject({
      code: 'insufficient_scope',
      message: expect.stringContaining('catalog:write'),
    });
  });

  it('checks the Idempotency-Key before the body', async () => {
    const s = await seller();
    const res = await s.api.bulkProducts({}, null);
    expect(res.status).toBe(400);
    expect(res.body.error.code).toBe('idempotency_key_required');
  });

  it('refuses an Idempotency-Key over 255 characters with validation_error before the body', async () => {
    const s = await seller();
    const res = await s.api.bulkProducts({}, 'k'.repeat(256));
    expect(res.status).toBe(400);
    expect(res.body.error.code).toBe('validation_error');
    expect(res.body.error.details).toEqual([{ field: 'Idempotency-Key', issue: 'invalid' }]);
  });

  it('answers a stored outcome before the rate limit: a replay is served when the window is full and does not count', async () => {
    const s = await seller();
    const key = idemKey();
    const sku = uniqueSku();
    const first = await s.api.bulkProducts({ items: [{ external_sku: sku, title: 'X', price_iqd: 1 }] }, key);
    for (let i = 0; i < 59; i++) await s.api.bulkProducts({});
    const replay = await s.api.bulkProducts({ items: [{ external_sku: sku, title: 'X', price_iqd: 1 }] }, key);
    expect(replay.status).toBe(200);
    expect(replay.headers.get('idempotent-replayed')).toBe('true');
    expect(replay.body).toEqual(first.body);
    expect((await s.api.bulkProducts({})).status).toBe(429);
  });

  it('checks the rate limit before the body: the 61st request is 429 rate_limited with Retry-After, even with a bad body', async () => {
    const s = await seller();
    for (let i = 0; i < 60; i++) expect((await s.api.bulkProducts({})).status).toBe(400); // bad bodies count
    const res = await s.api.bulkProducts({ items: [{ external_sku: uniqueSku(), title: 'X', price_iqd: 1 }] });
    expect(res.status).toBe(429);
    expect(res.body.error.code).toBe('rate_limited');
    expect(res.headers.get('retry-after')).toBe('595');
    expect((await s.api.bulkProducts({})).status).toBe(429);
  });

  it('keeps its window apart from PATCH /inventory/bulk', async () => {
    const s = await seller();
    for (let i = 0; i < 60; i++) await s.api.bulkProducts({});
    expect((await s.api.bulkProducts({})).status).toBe(429);
    expect((await s.api.bulkInventory({})).status).toBe(400);
  });

  it('stores nothing for a refused request (400, 429), so the same key works once the request is fixed', async () => {
    const s = await seller();
    const key = idemKey();
    expect((await s.api.bulkProducts({ items: [] }, key)).status).toBe(400);
    const sku = uniqueSku();
    const res = await s.api.bulkProducts({ items: [{ external_sku: sku, title: 'X', price_iqd: 1 }] }, key);
    expect(res.status).toBe(200);
    expect(res.headers.get('idempotent-replayed')).toBeNull();
  });
});

describe('POST /products/bulk: idempotency', () => {
  it('replays the stored results with Idempotent-Replayed: true and creates nothing twice', async () => {
    const s = await seller();
    const key = idemKey();
    const sku = uniqueSku();
    const body = { items: [{ external_sku: sku, title: 'Once', price_iqd: 1 }] };
    const first = await s.api.bulkProducts(body, key);
    const second = await s.api.bulkProducts(body, key);
    expect(second.status).toBe(200);
    expect(second.headers.get('idempotent-replayed')).toBe('true');
    expect(second.body).toEqual(first.body);
    const count = await stack.db('variants').where({ seller_id: s.seller_id, sku }).count({ n: '*' });
    expect(Number(count[0].n)).toBe(1);
  });

  it('answers 409 idempotency_key_conflict for the same key with another body or on PATCH /inventory/bulk', async () => {
    const s = await seller();
    const key = idemKey();
    await s.api.bulkProducts({ items: [{ external_sku: uniqueSku(), title: 'A', price_iqd: 1 }] }, key);
    const other = await s.api.bulkProducts({ items: [{ external_sku: uniqueSku(), title: 'B', price_iqd: 1 }] }, key);
    expect(other.status).toBe(409);
    expect(other.body.error.code).toBe('idempotency_key_conflict');
    const route = await s.api.bulkInventory({ items: [{ external_sku: 'X', on_hand: 1 }] }, key);
    expect(route.status).toBe(409);
    expect(route.body.error.code).toBe('idempotency_key_conflict');
  });

  it('answers 409 idempotency_key_in_progress while the first request with the key still runs', async () => {
    const s = await seller();
    const key = idemKey();
    const body = { items: [{ external_sku: uniqueSku(), title: 'Slow', price_iqd: 1 }] };
    let release!: () => void;
    const gate = new Promise<void>((resolve) => (release = resolve));
    upsertMock.mockImplementationOnce(async (...args) => {
      await gate;
      return realUpsert(...args);
    });
    const first = s.api.bulkProducts(body, key);
    while (!(await stack.db('idempotency_records').where({ key, state: 'in_progress' }).first())) {
      await new Promise((resolve) => setTimeout(resolve, 5));
    }
    const second = await s.api.bulkProducts(body, key);
    expect(second.status).toBe(409);
    expect(second.body.error.code).toBe('idempotency_key_in_progress');
    release();
    expect((await first).status).toBe(200);
    expect((await s.api.bulkProducts(body, key)).headers.get('idempotent-replayed')).toBe('true');
  });

  it('stores a 500 that came after a write and replays it; resending under a new key then updates', async () => {
    const s = await seller();
    const key = idemKey();
    const sku = uniqueSku();
    const body = { items: [{ external_sku: sku, title: 'Half done', price_iqd: 1 }] };
    upsertMock.mockClear();
    upsertMock.mockImplementationOnce(async (...args) => {
      await realUpsert(...args);
      throw new Error('connection lost after the write');
    });
    const first = await s.api.bulkProducts(body, key);
    expect(first.status).toBe(500);
    expect(first.body.error).toEqual({
      code: 'internal_error',
      message: expect.any(String),
      request_id: expect.any(String),
    });
    const replay = await s.api.bulkProducts(body, key);
    expect(replay.status).toBe(500);
    expect(replay.headers.get('idempotent-replayed')).toBe('true');
    expect(replay.body).toEqual(first.body);
    expect(upsertMock).toHaveBeenCalledTimes(1); // the replay ran nothing
    expect((await s.api.get(`/products/${sku}`)).status).toBe(200);
    const resent = await s.api.bulkProducts(body, idemKey());
    expect(resent.body.results[0]).toMatchObject({ status: 'accepted' });
    const count = await stack.db('variants').where({ seller_id: s.seller_id, sku }).count({ n: '*' });
    expect(Number(count[0].n)).toBe(1);
  });
});

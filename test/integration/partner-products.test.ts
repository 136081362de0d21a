import { encodeCursor } from '../../src/http/cursor';
import { buildSeller } from '../helpers/factories';
import { call } from '../helpers/http';
import {
  ops,
  pageAll,
  partnerClient,
  PartnerClient,
  seedProducts,
  uniqueSku,
  stockSet,
  catalogProduct,
} from '../helpers/partner';
import { startStack, Stack } from '../helpers/stack';

/** GET /products and GET /products/{sku}: the catalog as the seller's ERP reads it. */
let stack: Stack;
beforeAll(async () => {
  stack = await startStack();
});
afterAll(() => stack.stop());

const ISO_MS = /^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}\.\d{3}Z$/;

async function seller(opts: Parameters<typeof buildSeller>[1] = {}) {
  const s = await buildSeller(stack.db, opts);
  return { ...s, api: partnerClient(stack.baseUrl, s.key) };
}

/** Creates one product through the real bulk route and returns its id. */
async function createViaApi(api: PartnerClient, row: Record<string, unknown>): Promise<string> {
  const res = await api.bulkProducts({ items: [row] });
  expect(res.body.results[0]).toMatchObject({ status: 'accepted' });
  return res.body.results[0].product_id;
}

const b64 = (doc: unknown) => Buffer.from(JSON.stringify(doc)).toString('base64url');
const ids = (rows: Array<{ id: string }>) => rows.map((r) => r.id);

describe('GET /products', () => {
  it('lists the seller’s products newest first by product id', async () => {
    const s = await seller();
    const seeded = await seedProducts(stack.db, s.seller_id, 5);
    const res = await s.api.get('/products');
    expect(res.status).toBe(200);
    expect(ids(res.body.data)).toEqual(ids(seeded).reverse());
    expect(res.body).toEqual({ data: expect.any(Array), next_cursor: null, has_more: false });
  });

  it('shows every Product and Variant field the spec lists, with an API-created product’s Default variant', async () => {
    const s = await seller();
    const sku = uniqueSku();
    const id = await createViaApi(s.api, {
      external_sku: sku,
      title: 'Blue Kettle',
      price_iqd: 25000,
      initial_stock: 7,
    });
    const res = await s.api.get('/products');
    expect(res.body.data).toEqual([
      {
        id,
        title: 'Blue Kettle',
        handle: expect.stringMatching(/^blue-kettle-[0-9a-z]{6}$/),
        status: 'draft',
        description: '',
        thumbnail: null,
        images: [],
        category_ids: [],
        brand: null,
        variants: [
          {
            offer_id: expect.stringMatching(/^off_/),
            variant_id: expect.stringMatching(/^var_/),
            sku,
            options: { Default: 'Default' },
            price: 25000,
            sale_price: null,
            campaign_label: null,
            stocked_quantity: 7,
            condition: null,
            notes: null,
          },
        ],
        catalog_managed: false,
        handling: null,
        rejection_reason: null,
        created_at: expect.stringMatching(ISO_MS),
        updated_at: expect.stringMatching(ISO_MS),
      },
    ]);
    const single = await s.api.get(`/products/${encodeURIComponent(sku)}`);
    expect(single.body).toEqual(res.body.data[0]);
  });

  it('sums stocked_quantity over all the seller’s locations, rounding each location’s level to the nearest unit', async () => {
    const s = await seller({ locations: 2 });
    const sku = uniqueSku();
    await createViaApi(s.api, { external_sku: sku, title: 'Rice 1 kg', price_iqd: 2000 });
    await stockSet(stack.db, s.seller_id, sku, s.locations[0].id, '2.5');
    await stockSet(stack.db, s.seller_id, sku, s.locations[1].id, '1.5');
    const res = await s.api.get(`/products/${sku}`);
    expect(res.body.variants[0].stocked_quantity).toBe(5); // round(2.5) + round(1.5), not round(4.0)
  });

  it('carries all of the seller’s variants on the product, so two SKUs on one product make one list entry', async () => {
    const s = await seller();
    const sku = uniqueSku();
    const id = await createViaApi(s.api, { external_sku: sku, title: 'T-shirt', price_iqd: 9000 });
    const red = uniqueSku('RED');
    await ops(
      stack.db,
      'product',
      'add-variant',
      '--product',
      id,
      '--sku',
      red,
      '--price',
      '9500',
      '--option',
      'Color=Red',
    );
    const res = await s.api.get('/products');
    expect(res.body.data).toHaveLength(1);
    expect(res.body.data[0].variants.map((v: any) => [v.sku, v.options, v.price])).toEqual([
      [sku, { Default: 'Default' }, 9000],
      [red, { Color: 'Red' }, 9500],
    ]);
  });

  it('shows a running markdown campaign as sale_price and campaign_label, keeping the list price', async () => {
    const s = await seller();
    const sku = uniqueSku();
    await createViaApi(s.api, { external_sku: sku, title: 'Lamp', price_iqd: 30000 });
    await ops(
      stack.db,
      'campaign',
      'start',
      '--seller',
      s.seller_id,
      '--sku',
      sku,
      '--percent',
      '15',
      '--label',
      'Eid sale',
    );
    const res = await s.api.get(`/products/${sku}`);
    expect(res.body.variants[0]).toMatchObject({ price: 30000, sale_price: 25500, campaign_label: 'Eid sale' });
  });

  it('pages 250 products with limit=100 into 100, 100 and 50, with no duplicates and none missing', async () => {
    const s = await seller();
    const seeded = await seedProducts(stack.db, s.seller_id, 250);
    const { pages, rows } = await pageAll(s.api, '/products?limit=100');
    expect(pages.map((p) => p.data.length)).toEqual([100, 100, 50]);
    expect(pages.map((p) => p.has_more)).toEqual([true, true, false]);
    expect(pages[2].next_cursor).toBeNull();
    expect(ids(rows)).toEqual(ids(seeded).reverse());
    expect(new Set(ids(rows)).size).toBe(250);
  });

  it('defaults limit to 20 and caps it at 100', async () => {
    const s = await seller();
    await seedProducts(stack.db, s.seller_id, 105);
    expect((await s.api.get('/products')).body.data).toHaveLength(20);
    expect((await s.api.get('/products?limit=7')).body.data).toHaveLength(7);
    expect((await s.api.get('/products?limit=1000')).body.data).toHaveLength(100);
  });

  it.each(['0', '-5', 'abc', '1.5', '', '1e2'])(
    'ignores a non-positive-integer limit (%p) and uses the default',
    async (limit) => {
      const s = await seller();
      await seedProducts(stack.db, s.seller_id, 25);
      const res = await s.api.get(`/products?limit=${limit}`);
      expect(res.status).toBe(200);
      expect(res.body.data).toHaveLength(20);
    },
  );

  it('applies the status filter in the query that cuts the page, so each filtered page is full while more exist', async () => {
    const s = await seller();
    // Every third product is published: 90 of 270, spread among the others.
    const seeded = await seedProducts(stack.db, s.seller_id, 270, {
      status: (i) => (i % 3 === 0 ? 'published' : 'draft'),
    });
    const { pages, rows } = await pageAll(s.api, '/products?status=published&limit=40');
    expect(pages.map((p) => p.data.length)).toEqual([40, 40, 10]);
    expect(rows.every((r) => r.status === 'published')).toBe(true);
    const published = seeded.filter((_, i) => (i + 1) % 3 === 0);
    expect(ids(rows)).toEqual(ids(published).reverse());
  });

  it('does not reject an unknown status; it matches nothing', async () => {
    const s = await seller();
    await seedProducts(stack.db, s.seller_id, 3);
    const res = await s.api.get('/products?status=archived');
    expect(res.status).toBe(200);
    expect(res.body).toEqual({ data: [], next_cursor: null, has_more: false });
  });

  it('treats an empty status as no filter', async () => {
    const s = await seller();
    await seedProducts(stack.db, s.seller_id, 3);
    expect((await s.api.get('/products?status=')).body.data).toHaveLength(3);
  });

  it('refuses status sent twice with 400 validation_error (field status, issue invalid)', async () => {
    const s = await seller();
    const res = await s.api.get('/products?status=draft&status=published');
    expect(res.status).toBe(400);
    expect(res.body.error).toMatchObject({
      code: 'validation_error',
      details: [{ field: 'status', issue: 'invalid' }],
    });
  });

  it('answers an empty page (not an error) for a seller without products', async () => {
    const s = await seller();
    const res = await s.api.get('/products');
    expect(res.body).toEqual({ data: [], next_cursor: null, has_more: false });
  });

  const refusedCursors: Array<[string, () => string]> = [
    ['an old offer-id cursor', () => b64({ v: 1, l: 'products', k: ['off_01jc0000000000000000000000'] })],
    ['a raw offer id', () => 'off_01jc0000000000000000000000'],
    ['a cursor of GET /orders', () => encodeCursor('orders', ['2026-11-21T10:00:00.000Z', 'ord_x'])],
    ['garbage', () => '%%%not-base64%%%'],
    ['base64 of something that is not JSON', () => Buffer.from('hello').toString('base64url')],
    ['a products cursor whose key is not one id', () => encodeCursor('products', ['a', 'b'])],
    ['a products cursor whose key is a number', () => encodeCursor('products', [42])],
    ['a products cursor whose id holds U+0000', () => encodeCursor('products', ['prod_\u0000'])],
  ];
  it.each(refusedCursors)(
    'refuses %s with 400 validation_error (field cursor, issue invalid)',
    async (_label, cursor) => {
      const s = await seller();
      const res = await s.api.get(`/products?cursor=${encodeURIComponent(cursor())}`);
      expect(res.status).toBe(400);
      expect(res.body.error).toEqual({
        code: 'validation_error',
        message: expect.any(String),
        details: [{ field: 'cursor', issue: 'invalid' }],
        request_id: expect.stringMatching(/^req_/),
      });
    },
  );

  it('refuses a cursor sent twice', async () => {
    const s = await seller();
    await seedProducts(stack.db, s.seller_id, 3);
    const first = await s.api.get('/products?limit=1');
    const c = encodeURIComponent(first.body.next_cursor);
    const res = await s.api.get(`/products?cursor=${c}&cursor=${c}`);
    expect(res.status).toBe(400);
    expect(res.body.error.details).toEqual([{ field: 'cursor', issue: 'invalid' }]);
  });

  it('never lists another seller’s products (cross-seller isolation)', async () => {
    const a = await seller();
    const b = await seller();
    const mine = await seedProducts(stack.db, a.seller_id, 3);
    await seedProducts(stack.db, b.seller_id, 3);
    const res = await a.api.get('/products?limit=100');
    expect(ids(res.body.data).sort()).toEqual(ids(mine).sort());
  });

  it('needs the catalog:read scope (403 insufficient_scope naming it)', async () => {
    const s = await seller({ scopes: ['catalog:write', 'inventory:write', 'orders:read'] });
    const res = await s.api.get('/products');
    expect(res.status).toBe(403);
    expect(res.body.error.code).toBe('insufficient_scope');
    expect(res.body.error.message).toContain('catalog:read');
  });

  it('refuses a live key in the sandbox with 401 api_key_wrong_environment', async () => {
    const live = await seller({ env: 'live' });
    const res = await live.api.get('/products');
    expect(res.status).toBe(401);
    expect(res.body.error.code).toBe('api_key_wrong_environment');
  });

  it('needs a key (401 invalid_api_key)', async () => {
    const res = await call(stack.baseUrl, 'GET', '/partner/v1/products');
    expect(res.status).toBe(401);
    expect(res.body.error.code).toBe('invalid_api_key');
  });
});

describe('GET /products/{sku}', () => {
  it('returns the same whole product for any of its variants’ SKUs', async () => {
    const s = await seller();
    const sku = uniqueSku();
    const id = await createViaApi(s.api, { external_sku: sku, title: 'Shoe', price_iqd: 40000 });
    const second = uniqueSku('SIZE42');
    await ops(
      stack.db,
      'product',
      'add-variant',
      '--product',
      id,
      '--sku',
      second,
      '--price',
      '41000',
      '--option',
      'Size=42',
    );
    const byFirst = await s.api.get(`/products/${sku}`);
    const bySecond = await s.api.get(`/products/${second}`);
    expect(byFirst.status).toBe(200);
    expect(bySecond.body).toEqual(byFirst.body);
    expect(bySecond.body.id).toBe(id);
    expect(bySecond.body.variants).toHaveLength(2);
  });

  it('returns the first (oldest) product when a SKU is reused on several products', async () => {
    const s = await seller();
    const prefix = uniqueSku('REUSED');
    const [older] = await seedProducts(stack.db, s.seller_id, 1, { prefix });
    const [newer] = await seedProducts(stack.db, s.seller_id, 1, { prefix });
    expect(newer.sku).toBe(older.sku);
    const res = await s.api.get(`/products/${older.sku}`);
    expect(res.body.id).toBe(older.id);
  });

  it('takes a URL-encoded SKU (slash, space, plus, non-ASCII)', async () => {
    const s = await seller();
    const sku = `${uniqueSku()}/A B+C-قميص`;
    const id = await createViaApi(s.api, { external_sku: sku, title: 'Odd SKU', price_iqd: 1000 });
    const res = await s.api.get(`/products/${encodeURIComponent(sku)}`);
    expect(res.status).toBe(200);
    expect(res.body.id).toBe(id);
    expect(res.body.variants[0].sku).toBe(sku);
  });

  it('answers 404 product_not_found when no product has the SKU', async () => {
    const s = await seller();
    const res = await s.api.get('/products/NOPE-404', { 'x-request-id': 'erp-1' });
    expect(res.status).toBe(404);
    expect(res.body).toEqual({
      error: { code: 'product_not_found', message: expect.any(String), request_id: 'erp-1' },
    });
  });

  it('answers 404 product_not_found for a SKU that cannot exist (U+0000), not a 500', async () => {
    const s = await seller();
    const res = await s.api.get('/products/A%00B');
    expect(res.status).toBe(404);
    expect(res.body.error.code).toBe('product_not_found');
  });

  it('answers 404 for another seller’s SKU (cross-seller isolation)', async () => {
    const a = await seller();
    const b = await seller();
    const sku = uniqueSku();
    await createViaApi(b.api, { external_sku: sku, title: 'Theirs', price_iqd: 1000 });
    const res = await a.api.get(`/products/${sku}`);
    expect(res.status).toBe(404);
    expect(res.body.error.code).toBe('product_not_found');
  });

  it('shows a catalog-managed product as catalog_managed', async () => {
    const s = await seller();
    const sku = uniqueSku();
    await catalogProduct(stack.db, s.seller_id, sku, 'iPhone', '900000');
    const res = await s.api.get(`/products/${sku}`);
    expect(res.body).toMatchObject({ catalog_managed: true, status: 'published' });
  });

  it('needs the catalog:read scope', async () => {
    const s = await seller({ scopes: ['orders:read'] });
    const res = await s.api.get('/products/ANY');
    expect(res.status).toBe(403);
    expect(res.body.error.code).toBe('insufficient_scope');
  });
});

describe('Product review through the operator CLI', () => {
  it('moves draft → proposed (submit) → published (approve)', async () => {
    const s = await seller();
    const sku = uniqueSku();
    const id = await createViaApi(s.api, { external_sku: sku, title: 'Chair', price_iqd: 50000 });
    expect(await ops(stack.db, 'product', 'submit', '--product', id)).toMatchObject({
      product_id: id,
      status: 'proposed',
    });
    expect((await s.api.get(`/products/${sku}`)).body.status).toBe('proposed');
    expect(await ops(stack.db, 'product', 'approve', '--product', id)).toMatchObject({
      product_id: id,
      status: 'published',
    });
    expect((await s.api.get(`/products/${sku}`)).body).toMatchObject({ status: 'published', rejection_reason: null });
  });

  it('moves proposed → rejected (reject) with rejection_reason, and rejected → proposed (resubmit) clearing it', async () => {
    const s = await seller();
    const sku = uniqueSku();
    const id = await createViaApi(s.api, { external_sku: sku, title: 'Table', price_iqd: 70000 });
    await ops(stack.db, 'product', 'submit', '--product', id);
    const rejected = await ops(stack.db, 'product', 'reject', '--product', id, '--reason', 'Photos missing');
    expect(rejected).toEqual({ product_id: id, status: 'rejected', rejection_reason: 'Photos missing' });
    expect((await s.api.get(`/products/${sku}`)).body).toMatchObject({
      status: 'rejected',
      rejection_reason: 'Photos missing',
    });
    expect(await ops(stack.db, 'product', 'resubmit', '--product', id)).toMatchObject({ status: 'proposed' });
    expect((await s.api.get(`/products/${sku}`)).body).toMatchObject({ status: 'proposed', rejection_reason: null });
  });
});

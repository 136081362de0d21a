import { bulkUpdateInventory } from '../../src/partner/inventory-bulk';
import { BULK_INVENTORY_ROWS } from '../../src/partner/schemas';
import { buildSeller } from '../helpers/factories';
import { call } from '../helpers/http';
import { idemKey, ops, partnerClient, seedProducts, uniqueSku, stockSet } from '../helpers/partner';
import { startStack, Stack } from '../helpers/stack';

/** PATCH /inventory/bulk: absolute stock at the primary location and list prices, row by row. */

// The real service, wrapped so one test can make it fail after it has written (a stored 500).
jest.mock('../../src/partner/inventory-bulk', () => {
  const actual = jest.requireActual('../../src/partner/inventory-bulk');
  return { ...actual, bulkUpdateInventory: jest.fn(actual.bulkUpdateInventory) };
});
const inventoryMock = bulkUpdateInventory as jest.MockedFunction<typeof bulkUpdateInventory>;
const realInventory: typeof bulkUpdateInventory = jest.requireActual(
  '../../src/partner/inventory-bulk',
).bulkUpdateInventory;

/** A list price the database refuses to store, to fail the price write after the stock write. */
const FAILING_PRICE = 999_999_937;

let stack: Stack;
beforeAll(async () => {
  stack = await startStack();
  await stack.db.raw(`
    CREATE OR REPLACE FUNCTION test_fail_price_update() RETURNS trigger AS $$
    BEGIN IF NEW.price = ${FAILING_PRICE} THEN RAISE EXCEPTION 'injected failure'; END IF; RETURN NEW; END $$
    LANGUAGE plpgsql;
    DROP TRIGGER IF EXISTS test_fail_price_update ON variants;
    CREATE TRIGGER test_fail_price_update BEFORE UPDATE ON variants
      FOR EACH ROW EXECUTE FUNCTION test_fail_price_update();`);
});
afterAll(async () => {
  await stack.db.raw('DROP TRIGGER IF EXISTS test_fail_price_update ON variants');
  await stack.stop();
});

/** Resolves once some statement of this database is waiting for a lock held by another transaction. */
async function waitForLockWait(): Promise<void> {
  for (let i = 0; i < 200; i++) {
    const { rows } = await stack.db.raw(
      `SELECT 1 FROM pg_stat_activity WHERE datname = current_database() AND wait_event_type = 'Lock'`,
    );
    if (rows.length > 0) return;
    await new Promise((resolve) => setTimeout(resolve, 10));
  }
  throw new Error('no statement came to wait for a lock');
}

async function seller(opts: Parameters<typeof buildSeller>[1] = {}) {
  const s = await buildSeller(stack.db, opts);
  return { ...s, api: partnerClient(stack.baseUrl, s.key) };
}

/** One product created through the real bulk route; returns its SKU. */
async function product(s: Awaited<ReturnType<typeof seller>>, fields: Record<string, unknown> = {}): Promise<string> {
  const sku = uniqueSku();
  const res = await s.api.bulkProducts({ items: [{ external_sku: sku, title: 'Item', price_iqd: 10000, ...fields }] });
  expect(res.body.results[0].status).toBe('accepted');
  return sku;
}

async function levels(sellerId: string, sku: string): Promise<Record<string, number>> {
  const rows = await stack
    .db('stock_levels as sl')
    .join('variants as v', 'v.id', 'sl.variant_id')
    .where({ 'v.seller_id': sellerId, 'v.sku': sku })
    .select('sl.location_id', 'sl.level');
  return Object.fromEntries(rows.map((r) => [r.location_id, Number(r.level)]));
}

async function variant(sellerId: string, sku: string) {
  return stack
    .db('variants')
    .where({ seller_id: sellerId, sku })
    .orderBy('id')
    .first('price', 'sale_price', 'campaign_label');
}

const rowError = (code: string) => ({ code, message: expect.any(String) });
const accepted = (sku: string) => ({ external_sku: sku, status: 'accepted' });
const rejected = (sku: string | null, code: string) => ({
  external_sku: sku,
  status: 'rejected',
  error: rowError(code),
});

describe('PATCH /inventory/bulk: writing', () => {
  it('sets on_hand as the absolute level at the primary location only', async () => {
    const s = await seller({ locations: 2 });
    const sku = await product(s, { initial_stock: 4 });
    await stockSet(stack.db, s.seller_id, sku, s.locations[1].id, '3');
    const res = await s.api.bulkInventory({ items: [{ external_sku: sku, on_hand: 10 }] });
    expect(res.status).toBe(200);
    expect(res.body).toEqual({ results: [accepted(sku)] });
    expect(await levels(s.seller_id, sku)).toEqual({ [s.locations[0].id]: 10, [s.locations[1].id]: 3 });
    expect((await s.api.get(`/products/${sku}`)).body.variants[0].stocked_quantity).toBe(13);
  });

  it('sets on_hand 0', async () => {
    const s = await seller();
    const sku = await product(s, { initial_stock: 4 });
    expect((await s.api.bulkInventory({ items: [{ external_sku: sku, on_hand: 0 }] })).body.results).toEqual([
      accepted(sku),
    ]);
    expect(await levels(s.seller_id, sku)).toEqual({ [s.locations[0].id]: 0 });
  });

  it('sets price_iqd as the list price of a single-variant product', async () => {
    const s = await seller();
    const sku = await product(s);
    const res = await s.api.bulkInventory({ items: [{ external_sku: sku, price_iqd: 12500 }] });
    expect(res.body.results).toEqual([accepted(sku)]);
    expect((await s.api.get(`/products/${sku}`)).body.variants[0]).toMatchObject({ price: 12500, sale_price: null });
  });

  it('recomputes the discounted price from the new list price during a markdown campaign', async () => {
    const s = await seller();
    const sku = await product(s, { price_iqd: 20000 });
    await ops(
      stack.db,
      'campaign',
      'start',
      '--seller',
      s.seller_id,
      '--sku',
      sku,
      '--percent',
      '25',
      '--label',
      'Sale',
    );
    await s.api.bulkInventory({ items: [{ external_sku: sku, price_iqd: 30001 }] });
    // round(30001 * 75 / 100) = round(22500.75)
    expect(await variant(s.seller_id, sku)).toEqual({ price: 30001, sale_price: 22501, campaign_label: 'Sale' });
  });

  it('refuses the price of a multi-variant product with product_has_multiple_variants, after writing its on_hand', async () => {
    const s = await seller();
    const sku = await product(s, { initial_stock: 1 });
    const productId = (await s.api.get(`/products/${sku}`)).body.id;
    const second = uniqueSku('L');
    await ops(
      stack.db,
      'product',
      'add-variant',
      '--product',
      productId,
      '--sku',
      second,
      '--price',
      '11000',
      '--option',
      'Size=L',
    );
    const res = await s.api.bulkInventory({
      items: [
        { external_sku: sku, on_hand: 6, price_iqd: 1 },
        { external_sku: second, price_iqd: 1 },
        { external_sku: second, on_hand: 2 },
      ],
    });
    expect(res.body.results).toEqual([
      rejected(sku, 'product_has_multiple_variants'),
      rejected(second, 'product_has_multiple_variants'),
      accepted(second),
    ]);
    expect(await levels(s.seller_id, sku)).toEqual({ [s.locations[0].id]: 6 }); // the stock write happened
    expect(await levels(s.seller_id, second)).toEqual({ [s.locations[0].id]: 2 });
    expect((await variant(s.seller_id, sku)).price).toBe(10000);
    expect((await variant(s.seller_id, second)).price).toBe(11000);
  });

  /** A new seller's new product with its one variant (SKU `sku`, one in stock). */
  const productWithOneVariant = async () => {
    const s = await seller();
    const sku = await product(s, { initial_stock: 1 });
    const { product_id: productId } = await stack
      .db('variants')
      .where({ seller_id: s.seller_id, sku })
      .first('product_id');
    return { s, sku, productId: productId as string };
  };

  /** Adds a variant with SKU `sku` to the product straight in SQL, as another writer would. */
  const insertVariant = (db: typeof stack.db, sellerId: string, productId: string, sku: string) =>
    db('variants').insert({
      id: `var_${sku}`,
      offer_id: `off_${sku}`,
      product_id: productId,
      seller_id: sellerId,
      sku,
      options: JSON.stringify({ Size: sku }),
      price: 5000,
    });

  it('knows a product is multi-variant however its variants came and went: concurrent inserts count each other, a removed one no longer counts', async () => {
    const { s, sku, productId } = await productWithOneVariant();
    const extra = [uniqueSku('A'), uniqueSku('B')];
    // Two transactions add a variant each to the same product at the same time.
    const insert = (trx: typeof stack.db, extraSku: string) => insertVariant(trx, s.seller_id, productId, extraSku);
    const first = await stack.db.transaction();
    const second = await stack.db.transaction();
    await insert(first, extra[0]);
    const waiting = insert(second, extra[1]).then(() => undefined); // waits for the first to commit
    await waitForLockWait();
    await first.commit();
    await waiting;
    await second.commit();
    // The product counts them; each variant knows it has siblings (its own count is no longer exact).
    expect((await stack.db('products').where({ id: productId }).first('variant_count')).variant_count).toBe(3);
    const counts = await stack.db('variants').where({ product_id: productId }).pluck('variant_count');
    expect(counts.every((n: number) => n > 1)).toBe(true);
    const refused = await s.api.bulkInventory({ items: [{ external_sku: sku, price_iqd: 1 }] });
    expect(refused.body.results).toEqual([rejected(sku, 'product_has_multiple_variants')]);

    await stack.db('variants').whereIn('sku', extra).where({ seller_id: s.seller_id }).delete();
    expect(await stack.db('variants').where({ product_id: productId }).pluck('variant_count')).toEqual([1]);
    expect((await stack.db('products').where({ id: productId }).first('variant_count')).variant_count).toBe(1);
    const priced = await s.api.bulkInventory({ items: [{ external_sku: sku, price_iqd: 12345 }] });
    expect(priced.body.results).toEqual([accepted(sku)]);
    expect((await variant(s.seller_id, sku)).price).toBe(12345);
  });

  it('adds a variant in constant time: the siblings of a product with several are not rewritten', async () => {
    const { s, sku, productId } = await productWithOneVariant();
    const add = (extraSku: string) => insertVariant(stack.db, s.seller_id, productId, extraSku);
    const versions = async () =>
      Object.fromEntries(
        (await stack.db('variants').where({ product_id: productId }).select('id', 'xmin')).map(
          (r: { id: string; xmin: string }) => [r.id, r.xmin],
        ),
      );
    await add(uniqueSku('B')); // one to two: the first variant learns it has a sibling
    await add(uniqueSku('C'));
    const before = await versions();
    const fourth = uniqueSku('D');
    await add(fourth);
    const after = await versions();
    expect(Object.keys(after)).toHaveLength(4);
    for (const [id, xmin] of Object.entries(before)) expect([id, after[id]]).toEqual([id, xmin]);
    expect((await stack.db('products').where({ id: productId }).first('variant_count')).variant_count).toBe(4);
    expect(
      (
        await stack
          .db('variants')
          .where({ id: `var_${fourth}` })
          .first('variant_count')
      ).variant_count,
    ).toBe(4);
    const refused = await s.api.bulkInventory({ items: [{ external_sku: sku, price_iqd: 1 }] });
    expect(refused.body.results).toEqual([rejected(sku, 'product_has_multiple_variants')]);
  });

  it('rejects a row with internal_error when its price write fails after its stock write, which stays written', async () => {
    const s = await seller();
    const [failing, other] = [await product(s, { initial_stock: 1 }), await product(s, { initial_stock: 1 })];
    const res = await s.api.bulkInventory({
      items: [
        { external_sku: failing, on_hand: 8, price_iqd: FAILING_PRICE },
        { external_sku: other, on_hand: 3 },
      ],
    });
    expect(res.status).toBe(200);
    expect(res.body.results).toEqual([rejected(failing, 'internal_error'), accepted(other)]);
    expect(await levels(s.seller_id, failing)).toEqual({ [s.locations[0].id]: 8 });
    expect((await variant(s.seller_id, failing)).price).toBe(10000);
  });

  it('writes no adjustment audit entry for either field', async () => {
    const s = await seller();
    const sku = await product(s);
    await s.api.bulkInventory({ items: [{ external_sku: sku, on_hand: 9, price_iqd: 5 }] });
    expect(await stack.db('stock_adjustments').where({ seller_id: s.seller_id }).first()).toBeUndefined();
  });

  it('writes to the first (oldest) product when the SKU is reused on two products', async () => {
    const s = await seller();
    const prefix = uniqueSku('REUSED');
    const [older] = await seedProducts(stack.db, s.seller_id, 1, { prefix, price: 100 });
    const [newer] = await seedProducts(stack.db, s.seller_id, 1, { prefix, price: 100 });
    await s.api.bulkInventory({ items: [{ external_sku: older.sku, on_hand: 8, price_iqd: 900 }] });
    const rows = await stack
      .db('variants as v')
      .join('stock_levels as sl', 'sl.variant_id', 'v.id')
      .whereIn('v.id', [older.variantId, newer.variantId])
      .orderBy('v.id')
      .select('v.price', 'sl.level');
    expect(rows.map((r) => [r.price, Number(r.level)])).toEqual([
      [900, 8],
      [100, 0],
    ]);
  });

  it('lets the later row win when a SKU repeats in one request', async () => {
    const s = await seller();
    const sku = await product(s);
    const res = await s.api.bulkInventory({
      items: [
        { external_sku: sku, on_hand: 1, price_iqd: 100 },
        { external_sku: sku, on_hand: 2 },
        { external_sku: sku, price_iqd: 300 },
      ],
    });
    expect(res.body.results).toEqual([accepted(sku), accepted(sku), accepted(sku)]);
    expect(await levels(s.seller_id, sku)).toEqual({ [s.locations[0].id]: 2 });
    expect((await variant(s.seller_id, sku)).price).toBe(300);
  });
});

describe('PATCH /inventory/bulk: row validation, before anything in the row is written', () => {
  it('rejects a row that is not an object, or whose external_sku is missing or blank, with external_sku null', async () => {
    const s = await seller();
    const res = await s.api.bulkInventory({
      items: ['A', 3, null, [], { on_hand: 1 }, { external_sku: ' ', on_hand: 1 }, { external_sku: 5, on_hand: 1 }],
    });
    expect(res.status).toBe(200);
    expect(res.body.results).toEqual(Array.from({ length: 7 }, () => rejected(null, 'validation_error')));
  });

  it('rejects a row with neither on_hand nor price_iqd set, null counting as not set', async () => {
    const s = await seller();
    const sku = await product(s);
    const res = await s.api.bulkInventory({
      items: [{ external_sku: sku }, { external_sku: sku, on_hand: null, price_iqd: null }],
    });
    expect(res.body.results).toEqual([rejected(sku, 'validation_error'), rejected(sku, 'validation_error')]);
  });

  it.each([
    ['negative', -1],
    ['fractional', 2.5],
    ['a string', '5'],
    ['a boolean', true],
  ])('rejects an on_hand that is %s and writes nothing in that row, not even its price_iqd', async (_label, onHand) => {
    const s = await seller();
    const sku = await product(s, { initial_stock: 4 });
    const res = await s.api.bulkInventory({ items: [{ external_sku: sku, on_hand: onHand, price_iqd: 1 }] });
    expect(res.body.results).toEqual([rejected(sku, 'validation_error')]);
    expect(await levels(s.seller_id, sku)).toEqual({ [s.locations[0].id]: 4 });
    expect((await variant(s.seller_id, sku)).price).toBe(10000);
  });

  it('drops a price_iqd of the wrong JSON type; a row whose only field it was is accepted with nothing changed', async () => {
    const s = await seller();
    const sku = await product(s, { initial_stock: 4 });
    const res = await s.api.bulkInventory({
      items: [
        { external_sku: sku, price_iqd: '999' },
        { external_sku: sku, price_iqd: { amount: 1 }, on_hand: 7 },
      ],
    });
    expect(res.body.results).toEqual([accepted(sku), accepted(sku)]);
    expect((await variant(s.seller_id, sku)).price).toBe(10000);
    expect(await levels(s.seller_id, sku)).toEqual({ [s.locations[0].id]: 7 });
  });

  it.each([
    ['negative', -100],
    ['fractional', 99.5],
  ])('rejects a price_iqd that is %s (validation_error) and writes nothing in that row', async (_label, price) => {
    const s = await seller();
    const sku = await product(s, { initial_stock: 4 });
    const res = await s.api.bulkInventory({ items: [{ external_sku: sku, on_hand: 9, price_iqd: price }] });
    expect(res.body.results).toEqual([rejected(sku, 'validation_error')]);
    expect(await levels(s.seller_id, sku)).toEqual({ [s.locations[0].id]: 4 });
  });

  it('rejects a SKU that is not on any of the seller’s products with product_not_found', async () => {
    const s = await seller();
    const res = await s.api.bulkInventory({ items: [{ external_sku: 'NO-SUCH-SKU', on_hand: 1 }] });
    expect(res.body.results).toEqual([rejected('NO-SUCH-SKU', 'product_not_found')]);
  });

  it('rejects a SKU no product can have (U+0000, a lone surrogate) like a missing one, and stores the outcome', async () => {
    const s = await seller();
    const key = idemKey();
    const body = {
      items: [
        { external_sku: 'A\u0000B', on_hand: 1 },
        { external_sku: 'C\ud800', on_hand: 1 },
      ],
    };
    const res = await s.api.bulkInventory(body, key);
    expect(res.status).toBe(200);
    expect(res.body.results).toEqual([rejected(null, 'validation_error'), rejected(null, 'validation_error')]);
    expect((await s.api.bulkInventory(body, key)).headers.get('idempotent-replayed')).toBe('true');
  });

  it('rejects on_hand with inventory_item_not_found when the seller has no stock location, and still sets a price', async () => {
    const s = await seller({ locations: 0 });
    const sku = await product(s);
    const res = await s.api.bulkInventory({
      items: [
        { external_sku: sku, on_hand: 3 },
        { external_sku: sku, price_iqd: 777 },
      ],
    });
    expect(res.body.results).toEqual([rejected(sku, 'inventory_item_not_found'), accepted(sku)]);
    expect((await variant(s.seller_id, sku)).price).toBe(777);
  });

  it('never touches another seller’s SKU (product_not_found; their stock and price unchanged)', async () => {
    const a = await seller();
    const b = await seller();
    const theirs = await product(b, { initial_stock: 5 });
    const res = await a.api.bulkInventory({ items: [{ external_sku: theirs, on_hand: 0, price_iqd: 1 }] });
    expect(res.body.results).toEqual([rejected(theirs, 'product_not_found')]);
    expect(await levels(b.seller_id, theirs)).toEqual({ [b.locations[0].id]: 5 });
    expect((await variant(b.seller_id, theirs)).price).toBe(10000);
  });
});

describe('PATCH /inventory/bulk: batches', () => {
  it('answers a 500-row batch of mixed good and bad rows row by row, in request order', async () => {
    const s = await seller();
    const seeded = await seedProducts(stack.db, s.seller_id, 450, { price: 100, stock: 1 });
    const items: unknown[] = [];
    const expected: unknown[] = [];
    seeded.forEach((p, i) => {
      items.push({ external_sku: p.sku, on_hand: i, price_iqd: 1000 + i });
      expected.push(accepted(p.sku));
      if (i % 9 === 0) {
        // 50 bad rows spread through the batch
        const bad = [
          [{ external_sku: p.sku, on_hand: -1 }, rejected(p.sku, 'validation_error')],
          [{ external_sku: `${p.sku}-X`, on_hand: 1 }, rejected(`${p.sku}-X`, 'product_not_found')],
          [{ external_sku: '', on_hand: 1 }, rejected(null, 'validation_error')],
          [{ external_sku: p.sku }, rejected(p.sku, 'validation_error')],
          ['not a row', rejected(null, 'validation_error')],
        ][(i / 9) % 5];
        items.push(bad[0]);
        expected.push(bad[1]);
      }
    });
    expect(items).toHaveLength(BULK_INVENTORY_ROWS);
    const res = await s.api.bulkInventory({ items });
    expect(res.status).toBe(200);
    expect(res.body.results).toEqual(expected);
    const written = await stack
      .db('variants as v')
      .join('stock_levels as sl', 'sl.variant_id', 'v.id')
      .where('v.seller_id', s.seller_id)
      .orderBy('v.id')
      .select('v.price', 'sl.level');
    expect(written.map((r) => [r.price, Number(r.level)])).toEqual(seeded.map((_, i) => [1000 + i, i]));
  });

  it.each([
    ['items missing', 'missing', {}],
    ['items not an array', 'missing', { items: 'x' }],
    ['items empty', 'missing', { items: [] }],
    [
      '501 rows (the cap + 1)',
      'too_many',
      { items: Array.from({ length: 501 }, (_, i) => ({ external_sku: `S${i}`, on_hand: 1 })) },
    ],
  ])('refuses %s with a top-level 400 validation_error (issue %s)', async (_label, issue, body) => {
    const s = await seller();
    const res = await s.api.bulkInventory(body);
    expect(res.status).toBe(400);
    expect(res.body.error).toEqual({
      code: 'validation_error',
      message: expect.any(String),
      details: [{ field: 'items', issue }],
      request_id: expect.any(String),
    });
  });
});

describe('PATCH /inventory/bulk: check order (key, scope, Idempotency-Key, stored outcome, rate limit, body, rows)', () => {
  beforeEach(() => stack.clock.freeze(new Date(Math.ceil(Date.now() / 600_000) * 600_000 + 30_000)));
  afterEach(() => stack.clock.unfreeze());

  it('checks the key first', async () => {
    const res = await call(stack.baseUrl, 'PATCH', '/partner/v1/inventory/bulk', { body: {} });
    expect(res.status).toBe(401);
    expect(res.body.error.code).toBe('invalid_api_key');
  });

  it('checks the scope (inventory:write) before the Idempotency-Key', async () => {
    const s = await seller({ scopes: ['catalog:read', 'catalog:write'] });
    const res = await s.api.bulkInventory({}, null);
    expect(res.status).toBe(403);
    expect(res.body.error).toMatchObject({
      code: 'insufficient_scope',
      message: expect.stringContaining('inventory:write'),
    });
  });

  it('checks the Idempotency-Key before the body', async () => {
    const s = await seller();
    const res = await s.api.bulkInventory({}, null);
    expect(res.status).toBe(400);
    expect(res.body.error.code).toBe('idempotency_key_required');
  });

  it('answers a stored outcome before the rate limit, and replays do not count', async () => {
    const s = await seller();
    const sku = await product(s);
    const key = idemKey();
    const body = { items: [{ external_sku: sku, on_hand: 3 }] };
    const first = await s.api.bulkInventory(body, key);
    for (let i = 0; i < 59; i++) await s.api.bulkInventory({});
    for (let i = 0; i < 3; i++) {
      const replay = await s.api.bulkInventory(body, key);
      expect(replay.status).toBe(200);
      expect(replay.headers.get('idempotent-replayed')).toBe('true');
      expect(replay.body).toEqual(first.body);
    }
    const limited = await s.api.bulkInventory(body);
    expect(limited.status).toBe(429);
    expect(limited.body.error.code).toBe('rate_limited');
    expect(limited.headers.get('retry-after')).toBe('570');
  });

  it('checks the rate limit before the body, and counts requests refused for a bad body', async () => {
    const s = await seller();
    for (let i = 0; i < 60; i++) expect((await s.api.bulkInventory({ items: [] })).status).toBe(400);
    const res = await s.api.bulkInventory({ items: [] });
    expect(res.status).toBe(429);
    expect(res.headers.get('retry-after')).toBe('570');
  });

  it('opens again when the window resets', async () => {
    const s = await seller();
    const sku = await product(s);
    for (let i = 0; i < 61; i++) await s.api.bulkInventory({});
    stack.clock.advance(570_000);
    expect((await s.api.bulkInventory({ items: [{ external_sku: sku, on_hand: 1 }] })).status).toBe(200);
  });
});

describe('PATCH /inventory/bulk: idempotency', () => {
  it('replays instead of re-running, so a delayed retry cannot overwrite a newer sync', async () => {
    const s = await seller();
    const sku = await product(s);
    const oldKey = idemKey();
    await s.api.bulkInventory({ items: [{ external_sku: sku, on_hand: 5 }] }, oldKey);
    await s.api.bulkInventory({ items: [{ external_sku: sku, on_hand: 9 }] });
    const retry = await s.api.bulkInventory({ items: [{ external_sku: sku, on_hand: 5 }] }, oldKey);
    expect(retry.headers.get('idempotent-replayed')).toBe('true');
    expect(await levels(s.seller_id, sku)).toEqual({ [s.locations[0].id]: 9 });
  });

  it('stores a 500 that came after a write and replays it without running again', async () => {
    const s = await seller();
    const sku = await product(s);
    const key = idemKey();
    const body = { items: [{ external_sku: sku, on_hand: 4 }] };
    inventoryMock.mockClear();
    inventoryMock.mockImplementationOnce(async (...args) => {
      await realInventory(...args);
      throw new Error('lost after writing');
    });
    const first = await s.api.bulkInventory(body, key);
    expect(first.status).toBe(500);
    expect(first.body.error.code).toBe('internal_error');
    await stockSet(stack.db, s.seller_id, sku, s.locations[0].id, '1');
    const replay = await s.api.bulkInventory(body, key);
    expect(replay.status).toBe(500);
    expect(replay.headers.get('idempotent-replayed')).toBe('true');
    expect(replay.body).toEqual(first.body);
    expect(inventoryMock).toHaveBeenCalledTimes(1);
    expect(await levels(s.seller_id, sku)).toEqual({ [s.locations[0].id]: 1 });
  });
});

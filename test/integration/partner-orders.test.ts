import { encodeCursor } from '../../src/http/cursor';
import { buildSeller } from '../helpers/factories';
import { call } from '../helpers/http';
import { ops, pageAll, partnerClient, seedOrders, uniqueSku } from '../helpers/partner';
import { startStack, Stack } from '../helpers/stack';

/** GET /orders and GET /orders/{id}: the seller's orders, polled with `since`. */
let stack: Stack;
beforeAll(async () => {
  stack = await startStack();
});
afterAll(() => stack.stop());

type Seller = Awaited<ReturnType<typeof seller>>;
async function seller(opts: Parameters<typeof buildSeller>[1] = {}) {
  const s = await buildSeller(stack.db, opts);
  return { ...s, api: partnerClient(stack.baseUrl, s.key) };
}

/** A product through the real bulk route; returns its SKU. */
async function product(s: Seller, price = 25000): Promise<string> {
  const sku = uniqueSku();
  await s.api.bulkProducts({ items: [{ external_sku: sku, title: 'Desk lamp', price_iqd: price }] });
  return sku;
}

/** An order placed through the operator CLI (the marketplace checkout's stand-in). */
async function order(
  s: Seller,
  items: string,
  createdAt?: string,
): Promise<{ order_id: string; increment_id: string }> {
  return ops(
    stack.db,
    'order',
    'create',
    '--seller',
    s.seller_id,
    '--items',
    items,
    ...(createdAt ? ['--created-at', createdAt] : []),
  );
}

const orderIds = (rows: Array<{ order_id: string }>) => rows.map((r) => r.order_id);
const BASE = Date.parse('2026-06-01T12:00:00.000Z');
const minutes = (n: number) => new Date(BASE + n * 60_000);
const b64 = (doc: unknown) => Buffer.from(JSON.stringify(doc)).toString('base64url');

describe('GET /orders', () => {
  it('lists one summary row per order placed with the seller, newest first', async () => {
    const s = await seller();
    const sku = await product(s);
    const first = await order(s, `${sku}:2`, '2026-05-01T08:00:00Z');
    const second = await order(s, `${sku}:1:20000`, '2026-05-02T08:00:00Z');
    const res = await s.api.get('/orders');
    expect(res.status).toBe(200);
    expect(res.body).toEqual({
      data: [
        {
          order_id: second.order_id,
          increment_id: second.increment_id,
          status: 'pending',
          total: 20000,
          currency: 'IQD',
          created_at: '2026-05-02T08:00:00.000Z',
        },
        {
          order_id: first.order_id,
          increment_id: first.increment_id,
          status: 'pending',
          total: 50000,
          currency: 'IQD',
          created_at: '2026-05-01T08:00:00.000Z',
        },
      ],
      next_cursor: null,
      has_more: false,
    });
  });

  it('dates a row by the seller’s settlement record, not the order row', async () => {
    const s = await seller();
    const sku = await product(s);
    const placed = await order(s, `${sku}:1`, '2026-05-01T08:00:00Z');
    await stack
      .db('orders')
      .where({ id: placed.order_id })
      .update({ created_at: new Date('2020-01-01T00:00:00Z') });
    const res = await s.api.get('/orders?since=2026-05-01T08:00:00Z');
    expect(res.body.data).toEqual([
      expect.objectContaining({ order_id: placed.order_id, created_at: '2026-05-01T08:00:00.000Z' }),
    ]);
  });

  it('shows the seller-facing status, the same as the detail read', async () => {
    const s = await seller();
    const sku = await product(s);
    const placed = await order(s, `${sku}:1`);
    await ops(
      stack.db,
      'order',
      'set-status',
      '--order',
      placed.order_id,
      '--status',
      'shipped',
      '--tracking',
      'TRK1',
      '--carrier',
      'Aramex',
    );
    const list = await s.api.get('/orders');
    const detail = await s.api.get(`/orders/${placed.order_id}`);
    expect(list.body.data[0].status).toBe('shipped');
    expect(detail.body.status).toBe('shipped');
  });

  it('pages with next_cursor: no duplicates and none missing, even among orders placed at the same instant', async () => {
    const s = await seller();
    // 30 orders over 10 distinct instants, three at each.
    const ids = await seedOrders(stack.db, s.seller_id, 30, { at: (i) => minutes(Math.ceil(i / 3)) });
    const { pages, rows } = await pageAll(s.api, '/orders?limit=4');
    expect(pages.map((p) => p.data.length)).toEqual([4, 4, 4, 4, 4, 4, 4, 2]);
    expect(pages[pages.length - 1]).toMatchObject({ has_more: false, next_cursor: null });
    expect(new Set(orderIds(rows)).size).toBe(30);
    expect(orderIds(rows)).toEqual([...ids].reverse()); // newest first, ties by order id descending
  });

  it('defaults limit to 50, caps it at 200 and ignores a non-positive-integer value', async () => {
    const s = await seller();
    await seedOrders(stack.db, s.seller_id, 210, { at: (i) => minutes(i) });
    expect((await s.api.get('/orders')).body.data).toHaveLength(50);
    expect((await s.api.get('/orders?limit=500')).body.data).toHaveLength(200);
    expect((await s.api.get('/orders?limit=0')).body.data).toHaveLength(50);
    expect((await s.api.get('/orders?limit=-3')).body.data).toHaveLength(50);
    expect((await s.api.get('/orders?limit=ten')).body.data).toHaveLength(50);
    expect((await s.api.get('/orders?limit=12')).body.data).toHaveLength(12);
  });

  it('never lists another seller’s orders (cross-seller isolation)', async () => {
    const a = await seller();
    const b = await seller();
    const mine = await seedOrders(stack.db, a.seller_id, 3, { at: (i) => minutes(i) });
    await seedOrders(stack.db, b.seller_id, 3, { at: (i) => minutes(i) });
    expect(orderIds((await a.api.get('/orders')).body.data).sort()).toEqual([...mine].sort());
  });

  it('needs the orders:read scope', async () => {
    const s = await seller({ scopes: ['catalog:read', 'catalog:write', 'inventory:write'] });
    const res = await s.api.get('/orders');
    expect(res.status).toBe(403);
    expect(res.body.error).toMatchObject({
      code: 'insufficient_scope',
      message: expect.stringContaining('orders:read'),
    });
    expect((await call(stack.baseUrl, 'GET', '/partner/v1/orders')).status).toBe(401);
  });

  it.each([
    ['a products cursor', () => encodeCursor('products', ['prod_x'])],
    ['garbage', () => 'nope!'],
    ['an orders cursor whose time is not a time', () => encodeCursor('orders', ['yesterday', 'ord_x'])],
    ['an orders cursor with one key part', () => encodeCursor('orders', ['2026-06-01T12:00:00.000Z'])],
    ['a cursor of another version', () => b64({ v: 1, l: 'orders', k: ['2026-06-01T12:00:00.000Z', 'ord_x'] })],
  ])('refuses %s with 400 validation_error (field cursor, issue invalid)', async (_label, cursor) => {
    const s = await seller();
    const res = await s.api.get(`/orders?cursor=${encodeURIComponent(cursor())}`);
    expect(res.status).toBe(400);
    expect(res.body.error).toMatchObject({
      code: 'validation_error',
      details: [{ field: 'cursor', issue: 'invalid' }],
    });
  });
});

describe('GET /orders?since', () => {
  let s: Seller;
  let ids: string[];
  // Orders at BASE-1ms, BASE, BASE+1ms, BASE+1 min.
  const times = [BASE - 1, BASE, BASE + 1, BASE + 60_000].map((t) => new Date(t));
  beforeAll(async () => {
    s = await seller();
    ids = await seedOrders(stack.db, s.seller_id, times.length, { at: (i) => times[i - 1] });
  });
  const since = async (value: string) => {
    const res = await s.api.get(`/orders?since=${value}`);
    expect(res.status).toBe(200);
    return orderIds(res.body.data).reverse();
  };

  it('keeps orders whose settlement record was created at or after the instant (inclusive)', async () => {
    expect(await since('2026-06-01T12:00:00Z')).toEqual(ids.slice(1));
    expect(await since('2026-06-01T12:00:00.000Z')).toEqual(ids.slice(1));
  });

  it('excludes an order one millisecond before', async () => {
    expect(await since('2026-06-01T12:00:00.001Z')).toEqual(ids.slice(2));
    expect(await since('2026-06-01T11:59:59.999Z')).toEqual(ids);
  });

  it('compares finer fractions exactly (a stored millisecond is before .0005 past it)', async () => {
    expect(await since('2026-06-01T12:00:00.0005Z')).toEqual(ids.slice(2));
    expect(await since('2026-06-01T11:59:59.999999999Z')).toEqual(ids.slice(1));
  });

  it('takes a zone offset (with + encoded as %2B) as the same instant', async () => {
    expect(await since('2026-06-01T15:00:00%2B03:00')).toEqual(ids.slice(1));
    expect(await since('2026-06-01T07:00:00-05:00')).toEqual(ids.slice(1));
  });

  it('takes lower-case t and z', async () => {
    expect(await since('2026-06-01t12:00:00z')).toEqual(ids.slice(1));
  });

  it('treats an empty since as no bound', async () => {
    expect(await since('')).toEqual(ids);
  });

  it('accepts 29 February in a leap year', async () => {
    expect(await since('2028-02-29T00:00:00Z')).toEqual([]);
  });

  it.each([
    ['a date without time', '2026-06-01'],
    ['a time without zone', '2026-06-01T12:00:00'],
    ['an impossible date', '2026-02-30T00:00:00Z'],
    ['29 February outside a leap year', '2026-02-29T00:00:00Z'],
    ['month 13', '2026-13-01T00:00:00Z'],
    ['hour 24', '2026-06-01T24:00:00Z'],
    ['an unencoded + (which arrives as a space)', '2026-06-01T15:00:00+03:00'],
    ['an offset without a colon', '2026-06-01T15:00:00%2B0300'],
    ['an out-of-range offset', '2026-06-01T15:00:00%2B24:00'],
    ['a Unix timestamp', '1780315200'],
    ['minutes without seconds', '2026-06-01T12:00Z'],
  ])('refuses %s with 400 validation_error (field since, issue invalid)', async (_label, value) => {
    const res = await s.api.get(`/orders?since=${value}`);
    expect(res.status).toBe(400);
    expect(res.body.error).toEqual({
      code: 'validation_error',
      message: expect.any(String),
      details: [{ field: 'since', issue: 'invalid' }],
      request_id: expect.any(String),
    });
  });

  it('refuses since sent twice', async () => {
    const res = await s.api.get('/orders?since=2026-06-01T12:00:00Z&since=2026-06-01T12:00:00Z');
    expect(res.status).toBe(400);
    expect(res.body.error.details).toEqual([{ field: 'since', issue: 'invalid' }]);
  });

  it('pages within the since bound', async () => {
    const { rows } = await pageAll(s.api, '/orders?since=2026-06-01T12:00:00Z&limit=1');
    expect(orderIds(rows).reverse()).toEqual(ids.slice(1));
  });

  it('does not bring an order back when it is shipped, cancelled or returned later', async () => {
    const t = await seller();
    const sku = await product(t);
    const placed = await order(t, `${sku}:1`, '2026-05-01T08:00:00Z');
    await ops(stack.db, 'order', 'set-status', '--order', placed.order_id, '--status', 'shipped');
    await ops(stack.db, 'order', 'set-status', '--order', placed.order_id, '--status', 'returned');
    const res = await t.api.get('/orders?since=2026-05-01T08:00:00.001Z');
    expect(res.body.data).toEqual([]);
  });
});

describe('GET /orders/{id}', () => {
  it('returns the order detail with items, shipping address and settlement', async () => {
    const s = await seller();
    const sku = await product(s, 25000);
    const other = await product(s, 4000);
    const placed = await order(s, `${sku}:2,${other}:1:3500`, '2026-05-03T09:30:00Z');
    const res = await s.api.get(`/orders/${placed.order_id}`);
    expect(res.status).toBe(200);
    expect(res.body).toEqual({
      order_id: placed.order_id,
      increment_id: placed.increment_id,
      status: 'pending',
      total: 53500,
      currency: 'IQD',
      created_at: '2026-05-03T09:30:00.000Z',
      shipping_address: {
        first_name: 'Zainab',
        last_name: 'Ali',
        address_1: '12 Al-Rasheed Street',
        city: 'Baghdad',
        phone: '+9647701234567',
      },
      items: [
        {
          item_id: expect.any(String),
          title: 'Desk lamp',
          quantity: 2,
          unit_price: 25000,
          variant_id: expect.stringMatching(/^var_/),
          external_sku: sku,
        },
        {
          item_id: expect.any(String),
          title: 'Desk lamp',
          quantity: 1,
          unit_price: 3500,
          variant_id: expect.stringMatching(/^var_/),
          external_sku: other,
        },
      ],
      accepted_at: null,
      shipped_at: null,
      tracking_number: null,
      carrier: null,
      settlement: {
        status: 'held',
        commission_percent: 10,
        commission_amount: 5350,
        earnings: 48150,
        hold_days: 7,
        hold_starts_at: null,
        funds_released_at: null,
        delivery_confirmation_source: null,
      },
    });
  });

  it('shows acceptance, shipping, tracking and carrier once the dashboard moves the order', async () => {
    const s = await seller();
    const sku = await product(s);
    const placed = await order(s, `${sku}:1`);
    await ops(
      stack.db,
      'order',
      'set-status',
      '--order',
      placed.order_id,
      '--status',
      'shipped',
      '--tracking',
      'TRK-9',
      '--carrier',
      'Aramex',
    );
    const res = await s.api.get(`/orders/${placed.order_id}`);
    expect(res.body).toMatchObject({
      status: 'shipped',
      accepted_at: expect.stringMatching(/Z$/),
      shipped_at: expect.stringMatching(/Z$/),
      tracking_number: 'TRK-9',
      carrier: 'Aramex',
    });
  });

  it('keeps the SKU at the time of the order on its items', async () => {
    const s = await seller();
    const sku = await product(s);
    const placed = await order(s, `${sku}:1`);
    await stack
      .db('variants')
      .where({ seller_id: s.seller_id, sku })
      .update({ sku: `${sku}-RENAMED` });
    expect((await s.api.get(`/orders/${placed.order_id}`)).body.items[0].external_sku).toBe(sku);
  });

  it('answers 404 order_not_found for no such order', async () => {
    const s = await seller();
    const res = await s.api.get('/orders/ord_nope');
    expect(res.status).toBe(404);
    expect(res.body.error).toEqual({
      code: 'order_not_found',
      message: expect.any(String),
      request_id: expect.any(String),
    });
    expect((await s.api.get('/orders/ord%00x')).status).toBe(404);
  });

  it('answers 404 order_not_found for another seller’s order (cross-seller isolation)', async () => {
    const a = await seller();
    const b = await seller();
    const sku = await product(b);
    const theirs = await order(b, `${sku}:1`);
    const res = await a.api.get(`/orders/${theirs.order_id}`);
    expect(res.status).toBe(404);
    expect(res.body.error.code).toBe('order_not_found');
  });

  it('needs the orders:read scope', async () => {
    const s = await seller({ scopes: ['catalog:read'] });
    const res = await s.api.get('/orders/ord_x');
    expect(res.status).toBe(403);
    expect(res.body.error.code).toBe('insufficient_scope');
  });
});

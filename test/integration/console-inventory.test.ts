import { checkoutKeyUse, partnerKeyUse } from '../../src/keys/last-used';
import { BULK_ORDERS_MAX } from '../../src/console/order-queue-pages';
import { ADJUSTMENTS_PER_PAGE, INVENTORY_PER_PAGE } from '../../src/console/inventory-pages';
import { listInventory } from '../../src/partner/inventory-read';
import { buildMerchant, buildSeller } from '../helpers/factories';
import { auditRows, ConsoleBrowser, consoleUser, TestConsoleUser } from '../helpers/console';
import { call } from '../helpers/http';
import { ops, partnerClient, seedOrders, uniqueSku } from '../helpers/partner';
import { startStack, Stack } from '../helpers/stack';

/**
 * The seller console's inventory and prices (set with a guard against overwriting a value changed
 * since the page was read, adjustments and their history), bulk order actions, and keys' "last
 * used" (docs/console.md), over real HTTP on the real app and Postgres, with every new action run
 * for every role, another seller's object, a merchant's owner, no session, no CSRF token and a GET.
 */
let stack: Stack;
beforeAll(async () => {
  stack = await startStack();
});
afterAll(() => stack.stop());

const browser = () => new ConsoleBrowser(stack);

async function signedIn(user: TestConsoleUser) {
  const b = new ConsoleBrowser(stack);
  await b.signIn(user);
  return b;
}

/** A seller with one SKU (a single-variant product at 25,000 IQD, 10 in stock) and a pending order of it. */
async function stockedSeller(opts: { locations?: number } = {}) {
  const seller = await buildSeller(stack.db, { locations: opts.locations });
  const sku = uniqueSku('INV');
  const partner = partnerClient(stack.baseUrl, seller.key);
  expect(
    (await partner.bulkProducts({ items: [{ external_sku: sku, title: 'Desk lamp', price_iqd: 25000 }] })).status,
  ).toBe(200);
  if (opts.locations !== 0) {
    const set = await partner.bulkInventory({ items: [{ external_sku: sku, on_hand: 10 }] });
    expect(set.body.results[0].status).toBe('accepted');
  }
  const variant = await stack.db('variants').where({ seller_id: seller.seller_id, sku }).first('id', 'product_id');
  const order = await ops(stack.db, 'order', 'create', '--seller', seller.seller_id, '--items', `${sku}:1`);
  return {
    seller,
    sku,
    partner,
    variantId: variant.id as string,
    productId: variant.product_id as string,
    orderId: order.order_id as string,
  };
}
type Stocked = Awaited<ReturnType<typeof stockedSeller>>;

/** The primary location's level and the list price, as stored. */
const values = async (f: Stocked) => {
  const level = await stack
    .db('stock_levels as s')
    .join('stock_locations as l', 'l.id', 's.location_id')
    .where({ 's.variant_id': f.variantId, 'l.position': 0 })
    .first('s.level');
  const { price } = await stack.db('variants').where({ id: f.variantId }).first('price');
  return { level: level ? Number(level.level) : null, price: Number(price) };
};

/** The value a form of the page read carries back as `expected`. */
const expectedIn = (html: string, action: string) =>
  new RegExp(`action="${action}"[^]*?name="expected" value="([^"]*)"`).exec(html)?.[1];

describe('inventory and prices', () => {
  it('lists one row per SKU in SKU order, 50 a page by cursor, searched by SKU prefix, never another seller’s', async () => {
    const seller = await buildSeller(stack.db);
    const other = await buildSeller(stack.db);
    const prefix = uniqueSku('LIST');
    const skus = Array.from({ length: 60 }, (_, i) => `${prefix}-${String(i).padStart(3, '0')}`);
    const partner = partnerClient(stack.baseUrl, seller.key);
    for (const chunk of [skus.slice(0, 30), skus.slice(30)].reverse()) {
      const items = chunk.map((sku) => ({ external_sku: sku, title: `Item ${sku}`, price_iqd: 1000 }));
      expect((await partner.bulkProducts({ items })).status).toBe(200);
    }
    await partnerClient(stack.baseUrl, other.key).bulkProducts({
      items: [{ external_sku: `${prefix}-999`, title: 'Theirs', price_iqd: 1 }],
    });
    const b = await signedIn(await consoleUser(stack, { sellerId: seller.seller_id }, 'viewer'));
    const listed = (html: string) =>
      [...html.matchAll(/<a href="\/console\/inventory\/[^"]+" class="mono">([^<]+)</g)].map((m) => m[1]);

    const first = await b.get(`/console/inventory?sku=${encodeURIComponent(prefix)}`);
    expect(first.status).toBe(200);
    expect(listed(first.text)).toEqual(skus.slice(0, INVENTORY_PER_PAGE));
    const next = /href="(\/console\/inventory\?[^"]+)" rel="next"/.exec(first.text)![1].replace(/&amp;/g, '&');
    const second = await b.get(next);
    expect(listed(second.text)).toEqual(skus.slice(INVENTORY_PER_PAGE));
    expect(second.text).not.toContain('rel="next"');
    // A prefix narrows the list; `%` and `_` are characters of a SKU, not patterns.
    expect(listed((await b.get(`/console/inventory?sku=${encodeURIComponent(`${prefix}-05`)}`)).text)).toEqual(
      skus.slice(50, 60),
    );
    expect(listed((await b.get(`/console/inventory?sku=${encodeURIComponent(`${prefix}%`)}`)).text)).toEqual([]);
    // A viewer reads values, with no form.
    expect(first.text).not.toContain('name="on_hand"');
    expect((await b.get('/console/inventory?cursor=not-a-cursor')).status).toBe(422);
    expect(
      (await b.get(`/console/inventory?cursor=${Buffer.from('{"v":2,"l":"orders","k":["x"]}').toString('base64url')}`))
        .status,
    ).toBe(422);
  });

  it('reads a page in the index, a page’s rows and no more, however many SKUs the seller has', async () => {
    const seller = await buildSeller(stack.db);
    const stem = uniqueSku('SCALE');
    await stack.db.raw(
      `WITH p AS (
         INSERT INTO products (id, seller_id, title, handle, status)
         SELECT ? || '-p-' || i, ?, 'Scaled', 'scaled-' || i, 'published' FROM generate_series(1, 3000) i RETURNING id
       )
       INSERT INTO variants (id, offer_id, product_id, seller_id, sku, price)
       SELECT ? || '-v-' || i, ? || '-o-' || i, ? || '-p-' || i, ?, ? || '-' || lpad(i::text, 5, '0'), 100
         FROM generate_series(1, 3000) i WHERE (SELECT count(*) FROM p) > 0`,
      [stem, seller.seller_id, stem, stem, stem, seller.seller_id, stem],
    );
    await stack.db.raw('ANALYZE variants, products');
    const statements: Array<{ sql: string; bindings: unknown[] }> = [];
    const capture = (q: { sql: string; bindings: unknown[] }) => statements.push(q);
    stack.db.on('query', capture);
    const page = await listInventory(stack.db, seller.seller_id, { after: `${stem}-01500`, limit: 50 });
    stack.db.off('query', capture);
    expect(page.items[0].sku).toBe(`${stem}-01501`);
    const { sql, bindings } = statements.find((s) => s.sql.includes('DISTINCT ON'))!;
    const { rows } = await stack.db.raw(
      `EXPLAIN (ANALYZE, FORMAT JSON) ${sql.replace(/\$\d+/g, '?')}`,
      bindings as any,
    );
    const nodes: Array<Record<string, any>> = [];
    const walk = (n: Record<string, any>) => {
      nodes.push(n);
      (n.Plans ?? []).forEach(walk);
    };
    walk(rows[0]['QUERY PLAN'][0].Plan);
    const scan = nodes.find((n) => n['Relation Name'] === 'variants' && n['Index Name'] === 'variants_seller_sku_c');
    expect(scan).toBeDefined();
    expect(scan!['Actual Rows']).toBeLessThanOrEqual(51);
    // Variants and products are read for the page's rows only (no scan of the seller's 3,000).
    const read = nodes
      .filter((n) => n['Relation Name'] === 'variants' || n['Relation Name'] === 'products')
      .map((n) => (n['Actual Rows'] + (n['Rows Removed by Filter'] ?? 0)) * n['Actual Loops']);
    expect(read.reduce((a, b) => a + b, 0)).toBeLessThanOrEqual(2 * 51);
  });

  it('sets stock and price through PATCH /inventory/bulk’s service; the Partner API shows them; audited with from and to', async () => {
    const f = await stockedSeller();
    const user = await consoleUser(stack, { sellerId: f.seller.seller_id }, 'operator');
    const b = await signedIn(user);
    const page = await b.get(`/console/inventory/${f.variantId}`);
    expect(page.status).toBe(200);
    const base = `/console/inventory/${f.variantId}`;
    expect([expectedIn(page.text, `${base}/stock`), expectedIn(page.text, `${base}/price`)]).toEqual(['10', '25000']);

    const stock = await b.post(`${base}/stock`, { on_hand: '7', expected: '10' });
    expect(stock.status).toBe(200);
    expect(stock.text).toContain(`Stock of ${f.sku} set from 10 to 7.`);
    const price = await b.post(`${base}/price`, { price_iqd: '30000', expected: '25000' });
    expect(price.status).toBe(200);
    expect(await values(f)).toEqual({ level: 7, price: 30000 });
    const api = await f.partner.get(`/products/${encodeURIComponent(f.sku)}`);
    expect([api.body.variants[0].stocked_quantity, api.body.variants[0].price]).toEqual([7, 30000]);

    // Not a whole number 0 or more: 422, nothing written.
    for (const bad of ['-1', '2.5', 'lots', '']) {
      expect([bad, (await b.post(`${base}/stock`, { on_hand: bad, expected: '7' })).status]).toEqual([bad, 422]);
    }
    expect(await values(f)).toEqual({ level: 7, price: 30000 });
    expect((await auditRows(stack.db, user.id)).slice(1)).toEqual([
      {
        action: 'inventory_set_stock',
        outcome: 'success',
        target: f.sku,
        detail: { variant_id: f.variantId, from: '10', to: 7 },
      },
      {
        action: 'inventory_set_price',
        outcome: 'success',
        target: f.sku,
        detail: { variant_id: f.variantId, from: '25000', to: 30000 },
      },
    ]);
  });

  it('refuses to overwrite a value changed since the page was read: 409 with the value now, nothing written', async () => {
    const f = await stockedSeller();
    const user = await consoleUser(stack, { sellerId: f.seller.seller_id }, 'owner');
    const b = await signedIn(user);
    const base = `/console/inventory/${f.variantId}`;
    const read = await b.get('/console/inventory');
    const expected = expectedIn(read.text, `${base}/stock`);
    expect(expected).toBe('10');
    // Meanwhile the seller's system sets 12 through the Partner API.
    await f.partner.bulkInventory({ items: [{ external_sku: f.sku, on_hand: 12, price_iqd: 26000 }] });

    const stale = await b.post(`${base}/stock`, { on_hand: '5', expected: expected! });
    expect(stale.status).toBe(409);
    expect(stale.text).toContain(`${f.sku} changed since you read it (10): it is 12 now. Nothing was saved`);
    expect(await values(f)).toEqual({ level: 12, price: 26000 });
    // The answer is the page as it is now: its form carries 12, and saving from it works.
    expect(expectedIn(stale.text, `${base}/stock`)).toBe('12');
    expect((await b.post(`${base}/stock`, { on_hand: '5', expected: '12' })).status).toBe(200);
    expect((await values(f)).level).toBe(5);

    const stalePrice = await b.post(`${base}/price`, { price_iqd: '1', expected: '25000' });
    expect(stalePrice.status).toBe(409);
    expect(stalePrice.text).toContain('it is 26000 now');
    expect(await values(f)).toEqual({ level: 5, price: 26000 });

    // A level read as "no stock row" (0) that became a row meanwhile is a change too.
    await stack.db('stock_levels').where({ variant_id: f.variantId }).del();
    await f.partner.bulkInventory({ items: [{ external_sku: f.sku, on_hand: 3 }] });
    expect((await b.post(`${base}/stock`, { on_hand: '9', expected: '' })).status).toBe(409);
    expect((await values(f)).level).toBe(3);

    const rows = await auditRows(stack.db, user.id);
    expect(rows.filter((r) => r.outcome === 'failed').map((r) => [r.action, r.detail.error, r.detail.current])).toEqual(
      [
        ['inventory_set_stock', 'stale', '12'],
        ['inventory_set_price', 'stale', '26000'],
        ['inventory_set_stock', 'stale', '3'],
      ],
    );
  });

  it('two saves from the same page read: the first is written, the second is 409', async () => {
    const f = await stockedSeller();
    const b = await signedIn(await consoleUser(stack, { sellerId: f.seller.seller_id }, 'operator'));
    const a = await signedIn(await consoleUser(stack, { sellerId: f.seller.seller_id }, 'owner'));
    const base = `/console/inventory/${f.variantId}`;
    await Promise.all([a.get(base), b.get(base)]);
    const answers = await Promise.all([
      a.post(`${base}/stock`, { on_hand: '1', expected: '10' }),
      b.post(`${base}/stock`, { on_hand: '2', expected: '10' }),
    ]);
    expect(answers.map((r) => r.status).sort()).toEqual([200, 409]);
    const winner = answers[0].status === 200 ? 1 : 2;
    expect((await values(f)).level).toBe(winner);
  });

  it('keeps PATCH /inventory/bulk’s refusals: no price by SKU for a product with several variants, no stock without a location', async () => {
    const f = await stockedSeller();
    await ops(stack.db, 'product', 'add-variant', '--product', f.productId, '--sku', uniqueSku('SIB'), '--price', '1');
    const b = await signedIn(await consoleUser(stack, { sellerId: f.seller.seller_id }, 'owner'));
    const base = `/console/inventory/${f.variantId}`;
    const page = await b.get(base);
    expect(page.text).toContain('The product has several variants: its price is not set by SKU.');
    expect(page.text).not.toContain(`action="${base}/price"`);
    const multi = await b.post(`${base}/price`, { price_iqd: '1', expected: '25000' });
    expect(multi.status).toBe(422);
    expect((await values(f)).price).toBe(25000);

    const bare = await stockedSeller({ locations: 0 });
    const c = await signedIn(await consoleUser(stack, { sellerId: bare.seller.seller_id }, 'owner'));
    const barePage = await c.get(`/console/inventory/${bare.variantId}`);
    expect(barePage.text).toContain('No stock location: stock cannot be set.');
    const noLocation = await c.post(`/console/inventory/${bare.variantId}/stock`, { on_hand: '4', expected: '0' });
    expect(noLocation.status).toBe(422);
    expect(await stack.db('stock_levels').where({ variant_id: bare.variantId })).toEqual([]);
  });

  it('records adjustments through POST /inventory/adjustments’ service and shows the history newest first, paged', async () => {
    const f = await stockedSeller();
    const user = await consoleUser(stack, { sellerId: f.seller.seller_id }, 'operator');
    const b = await signedIn(user);
    const base = `/console/inventory/${f.variantId}`;
    await b.get(base);
    const damaged = await b.post(`${base}/adjustments`, { category: 'damaged', delta: '-2', reason: 'Dropped' });
    expect(damaged.status).toBe(200);
    expect(damaged.text).toContain(`Adjustment recorded: -2 for ${f.sku}; 8 in stock now.`);
    expect(
      (
        await b.post(`${base}/adjustments`, {
          category: 'external_sale',
          delta: '-1',
          reason: 'Market',
          unit_value: '30000',
        })
      ).status,
    ).toBe(200);
    // The Partner API's adjustment shows in the same history, with its key.
    expect(
      (await f.partner.adjust({ reason: 'Delivery', category: 'received', items: [{ external_sku: f.sku, delta: 5 }] }))
        .status,
    ).toBe(200);
    const stored = await stack
      .db('stock_adjustments')
      .where({ variant_id: f.variantId })
      .orderBy([{ column: 'created_at' }, { column: 'id' }])
      .select('delta', 'category', 'reason', 'api_key_id', 'level_after');
    expect(stored.map((r) => [r.delta, r.category, r.api_key_id, Number(r.level_after)])).toEqual([
      [-2, 'damaged', null, 8],
      [-1, 'external_sale', null, 7],
      [5, 'received', f.seller.keyId, 12],
    ]);
    // The outside sale booked its revenue as through the API.
    expect(
      await stack.db('seller_ledger_entries').where({ seller_id: f.seller.seller_id }).select('kind', 'amount'),
    ).toEqual([{ kind: 'external_sale_revenue', amount: 30000 }]);
    const page = await b.get(base);
    const history = [
      ...page.text.matchAll(/<tr id="adj-[^"]+">\s*<td class="mono">[^<]+<\/td>\s*<td>\s*([^<]+?)\s*</g),
    ].map((m) => m[1]);
    expect(history).toEqual(['Received', 'Sold elsewhere', 'Damaged']);
    expect(page.text).toContain(`<span class="mono">${f.seller.keyId}</span>`);

    // Refusals: invalid fields (listed), below zero, a unit value without an outside sale. Nothing written.
    const invalid = await b.post(`${base}/adjustments`, { category: 'stolen', delta: 'two', reason: '' });
    expect(invalid.status).toBe(422);
    expect(invalid.text).toContain('Check these fields: Reason, Category, Change in units (negative to take away).');
    expect((await b.post(`${base}/adjustments`, { category: 'correction', delta: '0', reason: 'x' })).status).toBe(422);
    const negative = await b.post(`${base}/adjustments`, { category: 'correction', delta: '-13', reason: 'Count' });
    expect(negative.status).toBe(422);
    expect(negative.text).toContain('That would take the stock below zero');
    expect(
      (await b.post(`${base}/adjustments`, { category: 'correction', delta: '1', reason: 'x', unit_value: '5' }))
        .status,
    ).toBe(422);
    expect(await stack.db('stock_adjustments').where({ variant_id: f.variantId }).count()).toEqual([{ count: 3 }]);
    expect((await values(f)).level).toBe(12);
    const audited = (await auditRows(stack.db, user.id)).filter((r) => r.action === 'stock_adjust');
    expect(audited.map((r) => [r.outcome, r.detail.delta ?? null, r.detail.error ?? null])).toEqual([
      ['success', -2, null],
      ['success', -1, null],
      ['failed', -13, 'negative_result'],
    ]);
    expect(audited[0]).toMatchObject({ target: f.sku, detail: { category: 'damaged', reason: 'Dropped' } });

    // Paged: 60 more, newest first, 50 a page.
    const { location_id } = await stack.db('stock_levels').where({ variant_id: f.variantId }).first('location_id');
    const t0 = Date.parse('2026-01-01T00:00:00.000Z');
    await stack.db('stock_adjustments').insert(
      Array.from({ length: 60 }, (_, i) => ({
        id: `adj_seeded_${f.variantId}_${String(i).padStart(2, '0')}`,
        seller_id: f.seller.seller_id,
        variant_id: f.variantId,
        location_id,
        external_sku: f.sku,
        delta: 1,
        level_after: i,
        reason: `seeded ${i}`,
        category: 'correction',
        // Pairs share a millisecond: the id orders them.
        created_at: new Date(t0 + Math.floor(i / 2)),
      })),
    );
    const reasons = (html: string) =>
      [...html.matchAll(/<td>(seeded \d+|Dropped|Market|Delivery)<\/td>/g)].map((m) => m[1]);
    const one = await b.get(base);
    expect(reasons(one.text)).toHaveLength(ADJUSTMENTS_PER_PAGE);
    expect(reasons(one.text).slice(0, 4)).toEqual(['Delivery', 'Market', 'Dropped', 'seeded 59']);
    const older = /href="([^"]+)" rel="next"/.exec(one.text)![1].replace(/&amp;/g, '&');
    const two = await b.get(older);
    expect(reasons(two.text)).toEqual(Array.from({ length: 13 }, (_, i) => `seeded ${12 - i}`));
    expect(two.text).not.toContain('rel="next"');
  });
});

describe('bulk order actions', () => {
  /** A seller with `n` pending orders (seeded), and a signed-in user. */
  async function sellerWithOrders(n: number, role: 'owner' | 'operator' = 'operator') {
    const seller = await buildSeller(stack.db);
    const t0 = Date.now() - 86_400_000;
    const ids = await seedOrders(stack.db, seller.seller_id, n, { at: (i) => new Date(t0 + i * 1000) });
    const user = await consoleUser(stack, { sellerId: seller.seller_id }, role);
    const b = await signedIn(user);
    await b.get('/console/orders');
    return { seller, ids, user, b };
  }
  const statuses = async (ids: string[]) =>
    (
      await stack.db('orders').whereIn('id', ids).orderBy('id').select('id', 'status', 'carrier', 'tracking_number')
    ).map((o) => [o.status, o.carrier, o.tracking_number]);
  const outcomes = (html: string) =>
    Object.fromEntries(
      [...html.matchAll(/<tr id="bulk-([^"]+)" data-outcome="(done|refused)">/g)].map((m) => [m[1], m[2]]),
    );

  it('the pending queue ticks orders for owners and operators; viewers see no form', async () => {
    const { seller, ids, b } = await sellerWithOrders(2);
    const page = await b.get('/console/orders?status=pending');
    for (const id of ids) {
      expect(page.text).toMatch(new RegExp(`name="order_id"\\s+value="${id}"`));
      expect(page.text).toContain(`name="tracking.${id}"`);
    }
    expect(page.text).toContain('formaction="/console/orders/bulk/accept"');
    const viewer = await signedIn(await consoleUser(stack, { sellerId: seller.seller_id }, 'viewer'));
    expect((await viewer.get('/console/orders')).text).not.toContain('name="order_id"');
  });

  it('accepts several orders in one post, each through setOrderStatus; one whose status forbids it is refused with why, the others done', async () => {
    const { ids, user, b } = await sellerWithOrders(3);
    await ops(stack.db, 'order', 'set-status', '--order', ids[1], '--status', 'shipped');
    const res = await b.post('/console/orders/bulk/accept', { order_id: ids, queue: 'pending' });
    expect(res.status).toBe(200);
    expect(res.text).toContain('2 of 3 orders done.');
    expect(res.text).toContain('Refused: the order is Shipped.');
    expect(outcomes(res.text)).toEqual({ [ids[0]]: 'done', [ids[1]]: 'refused', [ids[2]]: 'done' });
    expect((await statuses(ids)).map((s) => s[0])).toEqual(['accepted', 'shipped', 'accepted']);
    const rows = await auditRows(stack.db, user.id);
    expect(rows.slice(1).map((r) => [r.action, r.outcome, r.target])).toEqual([
      ['order_accept', 'success', ids[0]],
      ['order_accept', 'failed', ids[1]],
      ['order_accept', 'success', ids[2]],
      ['order_bulk_accept', 'success', null],
    ]);
    expect(rows[2].detail).toEqual({ bulk: true, error: 'invalid_transition', status: 'shipped' });
    expect(rows.at(-1)!.detail).toEqual({ orders: 3, done: 2, refused: 1 });
  });

  it('ships with one carrier and a tracking number per order; an order without one is refused; the Partner API shows the rest shipped', async () => {
    const { seller, ids, b } = await sellerWithOrders(3, 'owner');
    const res = await b.post('/console/orders/bulk/ship', {
      order_id: ids,
      carrier: 'Aramex',
      [`tracking.${ids[0]}`]: 'AX1',
      [`tracking.${ids[2]}`]: 'AX3',
    });
    expect(res.status).toBe(200);
    expect(outcomes(res.text)).toEqual({ [ids[0]]: 'done', [ids[1]]: 'refused', [ids[2]]: 'done' });
    expect(res.text).toContain('Refused: no tracking number.');
    expect(await statuses(ids)).toEqual([
      ['shipped', 'Aramex', 'AX1'],
      ['pending', null, null],
      ['shipped', 'Aramex', 'AX3'],
    ]);
    const api = await call(stack.baseUrl, 'GET', `/partner/v1/orders/${ids[2]}`, { key: seller.key });
    expect([api.body.status, api.body.carrier, api.body.tracking_number]).toEqual(['shipped', 'Aramex', 'AX3']);
  });

  it('cancels with one reason (in the audit log), reversing the held settlements; all refused is 409', async () => {
    const { ids, user, b } = await sellerWithOrders(2);
    const res = await b.post('/console/orders/bulk/cancel', { order_id: ids, reason: 'Out of stock' });
    expect(res.status).toBe(200);
    expect((await statuses(ids)).map((s) => s[0])).toEqual(['cancelled', 'cancelled']);
    expect(await stack.db('settlements').whereIn('order_id', ids).pluck('status')).toEqual(['reversed', 'reversed']);
    const again = await b.post('/console/orders/bulk/cancel', { order_id: ids, reason: 'Again' });
    expect(again.status).toBe(409);
    expect(again.text).toContain('0 of 2 orders done.');
    const bulkRows = (await auditRows(stack.db, user.id)).filter((r) => r.action === 'order_bulk_cancel');
    expect(bulkRows.map((r) => [r.outcome, r.detail])).toEqual([
      ['success', { orders: 2, done: 2, refused: 0, reason: 'Out of stock' }],
      ['failed', { orders: 2, done: 0, refused: 2, reason: 'Again' }],
    ]);
  });

  it('refuses a post that cannot start with 422 and nothing done: no order, more than 100, no carrier, no reason', async () => {
    const { seller, ids, b } = await sellerWithOrders(BULK_ORDERS_MAX + 1);
    const tooMany = await b.post('/console/orders/bulk/accept', { order_id: ids });
    expect(tooMany.status).toBe(422);
    expect(tooMany.text).toContain(`At most ${BULK_ORDERS_MAX} orders at once; you ticked ${BULK_ORDERS_MAX + 1}.`);
    expect((await b.post('/console/orders/bulk/accept', {})).status).toBe(422);
    expect((await b.post('/console/orders/bulk/ship', { order_id: ids[0], [`tracking.${ids[0]}`]: 'T' })).status).toBe(
      422,
    );
    expect((await b.post('/console/orders/bulk/cancel', { order_id: ids[0] })).status).toBe(422);
    // A null character anywhere in a form: the form is refused (400), as on every console form.
    expect((await b.post('/console/orders/bulk/cancel', { order_id: ids[0], reason: '\u0000' })).status).toBe(400);
    expect(await stack.db('orders').where({ seller_id: seller.seller_id }).whereNot({ status: 'pending' })).toEqual([]);
    // Exactly 100 is one post (the same order twice counts once).
    const hundred = await b.post('/console/orders/bulk/accept', { order_id: [...ids.slice(0, 100), ids[0]] });
    expect(hundred.status).toBe(200);
    expect(hundred.text).toContain('100 of 100 orders done.');
  });

  it('asks for password and code again when the last were more than 5 minutes ago', async () => {
    const { ids, b } = await sellerWithOrders(1);
    stack.clock.advance(6 * 60_000);
    await b.get('/console/orders');
    const stale = await b.post('/console/orders/bulk/accept', { order_id: ids });
    expect([stale.status, stale.location]).toEqual([303, '/console/reauth?next=%2Fconsole%2Forders']);
    expect((await statuses(ids))[0][0]).toBe('pending');
  });
});

describe('keys’ "last used"', () => {
  const lastUsed = async (table: string, id: string) =>
    (await stack.db.raw(`SELECT last_used_at, xmin::text AS version FROM ${table} WHERE id = ?`, [id])).rows[0] as {
      last_used_at: Date | null;
      version: string;
    };

  it('a Partner key’s last use is recorded at most once a minute and shown on Settings › Integrations', async () => {
    const seller = await buildSeller(stack.db);
    const b = await signedIn(await consoleUser(stack, { sellerId: seller.seller_id }, 'developer'));
    const keyRow = (html: string) => new RegExp(`<tr id="key-${seller.keyId}">[^]*?</tr>`).exec(html)![0];
    expect(keyRow((await b.get('/console/settings/integrations')).text)).toMatch(/class="key-last-used">Never</);
    expect((await lastUsed('partner_keys', seller.keyId)).last_used_at).toBeNull();

    stack.clock.freeze();
    const used = stack.clock();
    expect((await call(stack.baseUrl, 'GET', '/partner/v1/orders', { key: seller.key })).status).toBe(200);
    await partnerKeyUse.settled();
    const first = await lastUsed('partner_keys', seller.keyId);
    expect(first.last_used_at).toEqual(used);
    expect(keyRow((await b.get('/console/settings/integrations')).text)).toContain(used.toISOString());

    // Within the minute: no write at all (the row's version is the same).
    stack.clock.advance(59_000);
    for (let i = 0; i < 3; i++)
      expect((await call(stack.baseUrl, 'GET', '/partner/v1/orders', { key: seller.key })).status).toBe(200);
    await partnerKeyUse.settled();
    expect(await lastUsed('partner_keys', seller.keyId)).toEqual(first);

    // A minute on, the next use moves it.
    stack.clock.advance(1_000);
    expect((await call(stack.baseUrl, 'GET', '/partner/v1/products', { key: seller.key })).status).toBe(200);
    await partnerKeyUse.settled();
    expect((await lastUsed('partner_keys', seller.keyId)).last_used_at).toEqual(stack.clock());
    // A wrong secret is not a use.
    stack.clock.advance(120_000);
    const wrong = seller.key.slice(0, -4) + (seller.key.endsWith('AAAA') ? 'BBBB' : 'AAAA');
    expect((await call(stack.baseUrl, 'GET', '/partner/v1/orders', { key: wrong })).status).toBe(401);
    await partnerKeyUse.settled();
    expect((await lastUsed('partner_keys', seller.keyId)).last_used_at).toEqual(
      new Date(stack.clock().getTime() - 120_000),
    );
    stack.clock.unfreeze();
  });

  it('a Checkout key’s last use is recorded the same way and shown on Developers › API keys', async () => {
    const merchant = await buildMerchant(stack.db);
    const b = await signedIn(await consoleUser(stack, { merchantId: merchant.merchantId }, 'viewer'));
    const keyRow = (html: string) => new RegExp(`<tr id="key-${merchant.secretKeyId}">[^]*?</tr>`).exec(html)![0];
    expect(keyRow((await b.get('/console/developers/keys')).text)).toMatch(/class="key-last-used">Never</);
    stack.clock.freeze();
    const used = stack.clock();
    expect((await call(stack.baseUrl, 'GET', '/v1/checkout/sessions', { key: merchant.secretKey })).status).toBe(200);
    await checkoutKeyUse.settled();
    const first = await lastUsed('checkout_keys', merchant.secretKeyId);
    expect(first.last_used_at).toEqual(used);
    stack.clock.advance(30_000);
    expect((await call(stack.baseUrl, 'GET', '/v1/checkout/sessions', { key: merchant.secretKey })).status).toBe(200);
    await checkoutKeyUse.settled();
    expect(await lastUsed('checkout_keys', merchant.secretKeyId)).toEqual(first);
    expect(keyRow((await b.get('/console/developers/keys')).text)).toContain(used.toISOString());
    stack.clock.unfreeze();
  });
});

describe('route × role matrix of the inventory and bulk actions', () => {
  const ROLES = ['owner', 'developer', 'operator', 'viewer'] as const;
  const ALLOWED = ['owner', 'operator'];
  /** Each new action: its URL, its fields for a fixture, its answer when allowed, and what it changes. */
  const ACTIONS: Array<{
    name: string;
    path: (f: Stocked) => string;
    fields: (f: Stocked) => Record<string, string | string[]>;
    ok: number;
  }> = [
    {
      name: 'set stock',
      path: (f) => `/console/inventory/${f.variantId}/stock`,
      fields: () => ({ on_hand: '3', expected: '10' }),
      ok: 200,
    },
    {
      name: 'set price',
      path: (f) => `/console/inventory/${f.variantId}/price`,
      fields: () => ({ price_iqd: '26000', expected: '25000' }),
      ok: 200,
    },
    {
      name: 'adjust stock',
      path: (f) => `/console/inventory/${f.variantId}/adjustments`,
      fields: () => ({ category: 'received', delta: '2', reason: 'Delivery' }),
      ok: 200,
    },
    {
      name: 'bulk accept',
      path: () => '/console/orders/bulk/accept',
      fields: (f) => ({ order_id: [f.orderId] }),
      ok: 200,
    },
    {
      name: 'bulk ship',
      path: () => '/console/orders/bulk/ship',
      fields: (f) => ({ order_id: [f.orderId], carrier: 'DHL', [`tracking.${f.orderId}`]: 'T1' }),
      ok: 200,
    },
    {
      name: 'bulk cancel',
      path: () => '/console/orders/bulk/cancel',
      fields: (f) => ({ order_id: [f.orderId], reason: 'No stock' }),
      ok: 200,
    },
  ];
  const snapshot = async (f: Stocked) => ({
    ...(await values(f)),
    adjustments: await stack.db('stock_adjustments').where({ variant_id: f.variantId }).count(),
    order: await stack.db('orders').where({ id: f.orderId }).first('status', 'carrier'),
  });

  for (const action of ACTIONS) {
    it(`${action.name}: owner and operator only, their own seller’s only; 401 signed out, 403 without CSRF token, 405 on GET`, async () => {
      const theirs = await stockedSeller();
      const merchant = await buildMerchant(stack.db);
      const outcomes: Record<string, number> = {};
      for (const role of ROLES) {
        const f = await stockedSeller();
        const b = await signedIn(await consoleUser(stack, { sellerId: f.seller.seller_id }, role));
        await b.get('/console/inventory');
        const before = await snapshot(f);
        // Without the page's token: refused, nothing done.
        expect([role, 'no csrf', (await b.post(action.path(f), action.fields(f), { csrf: null })).status]).toEqual([
          role,
          'no csrf',
          403,
        ]);
        expect(await snapshot(f)).toEqual(before);
        const res = await b.post(action.path(f), action.fields(f));
        outcomes[role] = res.status;
        if (ALLOWED.includes(role)) {
          expect(await snapshot(f)).not.toEqual(before);
          // Another seller's object, by an allowed role: 403, nothing changed.
          const beforeTheirs = await snapshot(theirs);
          const cross = await b.post(action.path(theirs), action.fields(theirs));
          expect([role, 'other seller', cross.status]).toEqual([role, 'other seller', 403]);
          expect(await snapshot(theirs)).toEqual(beforeTheirs);
        } else {
          expect(await snapshot(f)).toEqual(before);
        }
        expect([role, 'GET', (await b.get(action.path(f))).status]).toEqual([role, 'GET', 405]);
      }
      expect(outcomes).toEqual(Object.fromEntries(ROLES.map((r) => [r, ALLOWED.includes(r) ? action.ok : 403])));
      const m = await signedIn(await consoleUser(stack, { merchantId: merchant.merchantId }, 'owner'));
      await m.get('/console');
      expect((await m.post(action.path(theirs), action.fields(theirs))).status).toBe(403);
      const anon = browser();
      await anon.get('/console/sign-in');
      expect((await anon.post(action.path(theirs), action.fields(theirs))).status).toBe(401);
      expect(await snapshot(theirs)).toMatchObject({ level: 10, price: 25000, order: { status: 'pending' } });
    });
  }

  it('the pages: every seller role reads them; another seller’s SKU is 404; a merchant is 403; signed out goes to sign-in', async () => {
    const mine = await stockedSeller();
    const theirs = await stockedSeller();
    for (const role of ROLES) {
      const b = await signedIn(await consoleUser(stack, { sellerId: mine.seller.seller_id }, role));
      const pages = [
        await b.get('/console/inventory'),
        await b.get(`/console/inventory/${mine.variantId}`),
        await b.get(`/console/inventory/${theirs.variantId}`),
      ];
      expect([role, ...pages.map((p) => p.status)]).toEqual([role, 200, 200, 404]);
      expect(pages[1].text.includes(`action="/console/inventory/${mine.variantId}/stock"`)).toBe(
        ALLOWED.includes(role),
      );
    }
    const m = await signedIn(
      await consoleUser(stack, { merchantId: (await buildMerchant(stack.db)).merchantId }, 'owner'),
    );
    expect((await m.get('/console/inventory')).status).toBe(403);
    expect((await m.get(`/console/inventory/${mine.variantId}`)).status).toBe(403);
    // An id Postgres cannot hold is refused like any other's, never a 500.
    const owner = await signedIn(await consoleUser(stack, { sellerId: mine.seller.seller_id }, 'owner'));
    await owner.get('/console/inventory');
    expect((await owner.get('/console/inventory/%00')).status).toBe(404);
    expect((await owner.post('/console/inventory/%00/stock', { on_hand: '1', expected: '0' })).status).toBe(403);
    expect((await owner.post('/console/orders/bulk/accept', { order_id: ['\u0000', mine.orderId] })).status).toBe(400);
    expect((await stack.db('orders').where({ id: mine.orderId }).first()).status).toBe('pending');
    const anon = await browser().get(`/console/inventory/${mine.variantId}`);
    expect([anon.status, anon.location]).toEqual([303, '/console/sign-in']);
  });

  it('pages are right-to-left in Arabic and Kurdish, with the inventory texts translated', async () => {
    const f = await stockedSeller();
    const b = await signedIn(await consoleUser(stack, { sellerId: f.seller.seller_id }, 'owner'));
    const ar = await b.get(`/console/inventory/${f.variantId}?lang=ar`);
    expect(ar.text).toMatch(/<html lang="ar" dir="rtl">/);
    expect(ar.text).toContain('تسوية المخزون');
    const ku = await b.get('/console/orders?lang=ku');
    expect(ku.text).toMatch(/<html lang="ckb" dir="rtl">/);
    expect(ku.text).toContain('ناردنی دیاریکراوەکان');
  });
});

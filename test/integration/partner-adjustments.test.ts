import { buildSeller } from '../helpers/factories';
import { call } from '../helpers/http';
import { idemKey, ops, partnerClient, uniqueSku, stockSet } from '../helpers/partner';
import { startStack, Stack } from '../helpers/stack';
import { run } from '../../src/cli/run';
import { loadSettings } from '../../src/config';

/** POST /inventory/adjustments: signed deltas, all or nothing, one audit entry per item, the seller's books. */

/** SKUs with these prefixes make the database fail: the audit insert (a 500) or the ledger posting. */
const FAIL_AUDIT = 'EXPLODE-AUDIT';
const FAIL_BOOKS = 'EXPLODE-BOOKS';

let stack: Stack;
beforeAll(async () => {
  stack = await startStack();
  await stack.db.raw(`
    CREATE OR REPLACE FUNCTION test_fail_by_sku() RETURNS trigger AS $$
    BEGIN IF NEW.external_sku LIKE TG_ARGV[0] || '%' THEN RAISE EXCEPTION 'injected failure'; END IF; RETURN NEW; END $$
    LANGUAGE plpgsql;
    DROP TRIGGER IF EXISTS test_fail_audit ON stock_adjustments;
    CREATE TRIGGER test_fail_audit BEFORE INSERT ON stock_adjustments
      FOR EACH ROW EXECUTE FUNCTION test_fail_by_sku('${FAIL_AUDIT}');
    DROP TRIGGER IF EXISTS test_fail_books ON seller_ledger_entries;
    CREATE TRIGGER test_fail_books BEFORE INSERT ON seller_ledger_entries
      FOR EACH ROW EXECUTE FUNCTION test_fail_by_sku('${FAIL_BOOKS}');`);
});
afterAll(async () => {
  await stack.db.raw('DROP TRIGGER IF EXISTS test_fail_audit ON stock_adjustments');
  await stack.db.raw('DROP TRIGGER IF EXISTS test_fail_books ON seller_ledger_entries');
  await stack.stop();
});

type Seller = Awaited<ReturnType<typeof seller>>;
async function seller(opts: Parameters<typeof buildSeller>[1] = {}) {
  const s = await buildSeller(stack.db, opts);
  return { ...s, api: partnerClient(stack.baseUrl, s.key) };
}

/** A product created through the real bulk route, with `stock` units at the primary location. */
async function product(s: Seller, stock = 10, prefix = 'ADJ'): Promise<string> {
  const sku = uniqueSku(prefix);
  const res = await s.api.bulkProducts({
    items: [{ external_sku: sku, title: 'Item', price_iqd: 5000, initial_stock: stock }],
  });
  expect(res.body.results[0].status).toBe('accepted');
  return sku;
}

async function level(s: Seller, sku: string, locationIndex = 0): Promise<number | undefined> {
  const row = await stack
    .db('stock_levels as sl')
    .join('variants as v', 'v.id', 'sl.variant_id')
    .where({ 'v.seller_id': s.seller_id, 'v.sku': sku, 'sl.location_id': s.locations[locationIndex].id })
    .first('sl.level');
  return row ? Number(row.level) : undefined;
}

async function ledger(sellerId: string) {
  return (await ops(stack.db, 'ledger', 'list', '--seller', sellerId)).entries as Array<Record<string, unknown>>;
}

const adjustment = (items: unknown[], extra: Record<string, unknown> = {}) => ({
  reason: 'Stock count',
  category: 'correction',
  items,
  ...extra,
});

async function expectInvalid(s: Seller, body: unknown, details: Array<{ field: string; issue: string }>) {
  const res = await s.api.adjust(body);
  expect(res.status).toBe(400);
  expect(res.body.error).toEqual({
    code: 'validation_error',
    message: expect.any(String),
    details,
    request_id: expect.any(String),
  });
}

describe('POST /inventory/adjustments: applying', () => {
  it('applies signed deltas and answers reason, category and one data row per adjusted variant', async () => {
    const s = await seller();
    const [a, b] = [await product(s, 10), await product(s, 2)];
    const res = await s.api.adjust({
      reason: 'Cycle count 14 Nov',
      category: 'correction',
      items: [
        { external_sku: a, delta: -4 },
        { external_sku: b, delta: 3 },
      ],
    });
    expect(res.status).toBe(200);
    expect(res.body).toEqual({
      reason: 'Cycle count 14 Nov',
      category: 'correction',
      data: [
        {
          adjustment_id: expect.stringMatching(/^adj_/),
          external_sku: a,
          variant_id: expect.stringMatching(/^var_/),
          location_id: s.locations[0].id,
          delta: -4,
          stocked_quantity: 6,
        },
        {
          adjustment_id: expect.stringMatching(/^adj_/),
          external_sku: b,
          variant_id: expect.stringMatching(/^var_/),
          location_id: s.locations[0].id,
          delta: 3,
          stocked_quantity: 5,
        },
      ],
    });
    expect([await level(s, a), await level(s, b)]).toEqual([6, 5]);
  });

  it('writes one audit-trail entry per item', async () => {
    const s = await seller();
    const [a, b] = [await product(s, 10), await product(s, 10)];
    const res = await s.api.adjust({
      reason: 'Sold at the market stall',
      category: 'external_sale',
      unit_value: 7000,
      items: [
        { external_sku: a, delta: -2 },
        { external_sku: b, delta: -1 },
      ],
    });
    const audit = await stack.db('stock_adjustments').where({ seller_id: s.seller_id }).orderBy('external_sku');
    expect(
      audit.map((r) => ({
        id: r.id,
        sku: r.external_sku,
        delta: r.delta,
        after: Number(r.level_after),
        reason: r.reason,
        category: r.category,
        unit_value: Number(r.unit_value),
        key: r.api_key_id,
      })),
    ).toEqual(
      [
        { id: res.body.data[0].adjustment_id, sku: a, delta: -2, after: 8 },
        { id: res.body.data[1].adjustment_id, sku: b, delta: -1, after: 9 },
      ].map((e) => ({
        ...e,
        reason: 'Sold at the market stall',
        category: 'external_sale',
        unit_value: 7000,
        key: s.keyId,
      })),
    );
  });

  it('adjusts the given location_id, and the primary location when none is given', async () => {
    const s = await seller({ locations: 2 });
    const sku = await product(s, 4);
    const res = await s.api.adjust(adjustment([{ external_sku: sku, delta: 6, location_id: s.locations[1].id }]));
    expect(res.body.data[0]).toMatchObject({ location_id: s.locations[1].id, stocked_quantity: 10 });
    expect([await level(s, sku, 0), await level(s, sku, 1)]).toEqual([4, 6]);
    const primary = await s.api.adjust(adjustment([{ external_sku: sku, delta: -1 }]));
    expect(primary.body.data[0]).toMatchObject({ location_id: s.locations[0].id, stocked_quantity: 9 });
  });

  it('works on fractional levels: below zero only when the location’s level would go under 0', async () => {
    const s = await seller();
    const sku = await product(s, 0);
    await stockSet(stack.db, s.seller_id, sku, s.locations[0].id, '2.5');
    const over = await s.api.adjust(adjustment([{ external_sku: sku, delta: -3 }]));
    expect(over.status).toBe(422);
    const ok = await s.api.adjust(adjustment([{ external_sku: sku, delta: -2 }]));
    expect(ok.status).toBe(200);
    expect(await level(s, sku)).toBe(0.5);
    expect(ok.body.data[0].stocked_quantity).toBe(1); // 0.5 rounds half away from zero
  });

  it('takes every allowed category: damaged, external_sale, correction, received', async () => {
    const s = await seller();
    const sku = await product(s, 10);
    for (const category of ['damaged', 'external_sale', 'correction', 'received']) {
      const res = await s.api.adjust({ reason: 'r', category, items: [{ external_sku: sku, delta: -1 }] });
      expect([category, res.status]).toEqual([category, 200]);
    }
  });

  it('never takes stock below zero under 20 concurrent requests on one SKU', async () => {
    const s = await seller();
    const sku = await product(s, 10);
    const responses = await Promise.all(
      Array.from({ length: 20 }, () => s.api.adjust(adjustment([{ external_sku: sku, delta: -1 }]))),
    );
    const statuses = responses.map((r) => r.status).sort();
    expect(statuses).toEqual([...Array(10).fill(200), ...Array(10).fill(422)]);
    for (const r of responses.filter((x) => x.status === 422)) {
      expect(r.body.error.details).toEqual([{ field: 'items[0].delta', issue: 'negative_result' }]);
    }
    expect(await level(s, sku)).toBe(0);
    const after = await stack.db('stock_adjustments').where({ seller_id: s.seller_id }).pluck('level_after');
    expect(after.map(Number).sort((x, y) => x - y)).toEqual([0, 1, 2, 3, 4, 5, 6, 7, 8, 9]);
    const quantities = responses.filter((r) => r.status === 200).map((r) => r.body.data[0].stocked_quantity);
    expect(quantities.sort((x, y) => x - y)).toEqual([0, 1, 2, 3, 4, 5, 6, 7, 8, 9]);
  });

  it('serialises concurrent mixed requests on overlapping SKUs without deadlock or lost updates', async () => {
    const s = await seller();
    const [a, b] = [await product(s, 100), await product(s, 100)];
    const responses = await Promise.all(
      Array.from({ length: 20 }, (_, i) =>
        s.api.adjust(
          adjustment(
            i % 2 === 0
              ? [
                  { external_sku: a, delta: -1 },
                  { external_sku: b, delta: 2 },
                ]
              : [
                  { external_sku: b, delta: -3 },
                  { external_sku: a, delta: 1 },
                ],
          ),
        ),
      ),
    );
    expect(responses.every((r) => r.status === 200)).toBe(true);
    expect([await level(s, a), await level(s, b)]).toEqual([100, 90]);
  });
});

describe('POST /inventory/adjustments: all or nothing', () => {
  it('refuses the whole request with 404 inventory_item_not_found for an unknown SKU, writing nothing', async () => {
    const s = await seller();
    const sku = await product(s, 5);
    const res = await s.api.adjust(
      adjustment([
        { external_sku: sku, delta: -1 },
        { external_sku: 'NOT-MINE', delta: 1 },
      ]),
    );
    expect(res.status).toBe(404);
    expect(res.body.error).toEqual({
      code: 'inventory_item_not_found',
      message: expect.any(String),
      request_id: expect.any(String),
    });
    expect(await level(s, sku)).toBe(5);
    expect(await stack.db('stock_adjustments').where({ seller_id: s.seller_id }).first()).toBeUndefined();
  });

  it('refuses with 404 inventory_item_not_found for another seller’s SKU, leaving their stock alone', async () => {
    const a = await seller();
    const b = await seller();
    const theirs = await product(b, 5);
    const res = await a.api.adjust(adjustment([{ external_sku: theirs, delta: -5 }]));
    expect(res.status).toBe(404);
    expect(res.body.error.code).toBe('inventory_item_not_found');
    expect(await level(b, theirs)).toBe(5);
  });

  it('refuses with 404 inventory_item_not_found for a location_id that is not one of the seller’s', async () => {
    const a = await seller();
    const b = await seller();
    const sku = await product(a, 5);
    for (const location_id of ['loc_unknown', b.locations[0].id]) {
      const res = await a.api.adjust(adjustment([{ external_sku: sku, delta: 1, location_id }]));
      expect(res.status).toBe(404);
      expect(res.body.error.code).toBe('inventory_item_not_found');
    }
    expect(await level(a, sku)).toBe(5);
  });

  it('refuses with 422 validation_error (issue negative_result per item) when a delta would take stock below zero', async () => {
    const s = await seller();
    const [a, b, c] = [await product(s, 5), await product(s, 1), await product(s, 0)];
    const res = await s.api.adjust(
      adjustment([
        { external_sku: a, delta: -2 },
        { external_sku: b, delta: -2 },
        { external_sku: c, delta: -1 },
      ]),
    );
    expect(res.status).toBe(422);
    expect(res.body.error).toEqual({
      code: 'validation_error',
      message: expect.any(String),
      details: [
        { field: 'items[1].delta', issue: 'negative_result' },
        { field: 'items[2].delta', issue: 'negative_result' },
      ],
      request_id: expect.any(String),
    });
    expect([await level(s, a), await level(s, b), await level(s, c)]).toEqual([5, 1, 0]);
  });

  it('refuses with 422 validation_error when the seller has no stock location configured', async () => {
    const s = await seller({ locations: 0 });
    const sku = await product(s, 0);
    const res = await s.api.adjust(adjustment([{ external_sku: sku, delta: 1 }]));
    expect(res.status).toBe(422);
    expect(res.body.error.code).toBe('validation_error');
  });
});

describe('POST /inventory/adjustments: body validation (400 validation_error)', () => {
  let s: Seller;
  let sku: string;
  beforeAll(async () => {
    s = await seller();
    sku = await product(s, 10);
  });
  const item = () => ({ external_sku: sku, delta: -1 });

  it('requires reason (missing)', async () => {
    await expectInvalid(s, { category: 'damaged', items: [item()] }, [{ field: 'reason', issue: 'missing' }]);
    await expectInvalid(s, { reason: '  ', category: 'damaged', items: [item()] }, [
      { field: 'reason', issue: 'missing' },
    ]);
    await expectInvalid(s, { reason: 42, category: 'damaged', items: [item()] }, [
      { field: 'reason', issue: 'invalid' },
    ]);
  });

  it('requires category to be one of the allowed values (missing, invalid)', async () => {
    await expectInvalid(s, { reason: 'r', items: [item()] }, [{ field: 'category', issue: 'missing' }]);
    await expectInvalid(s, { reason: 'r', category: 'theft', items: [item()] }, [
      { field: 'category', issue: 'invalid' },
    ]);
  });

  it('allows unit_value only with external_sale (not_applicable)', async () => {
    await expectInvalid(s, { reason: 'r', category: 'damaged', unit_value: 100, items: [item()] }, [
      { field: 'unit_value', issue: 'not_applicable' },
    ]);
  });

  it.each([0, -5, 12.5, '100'])(
    'requires unit_value to be a positive whole number of IQD (%p is invalid)',
    async (unitValue) => {
      await expectInvalid(s, { reason: 'r', category: 'external_sale', unit_value: unitValue, items: [item()] }, [
        { field: 'unit_value', issue: 'invalid' },
      ]);
    },
  );

  it('refuses (unit_value invalid) an outside sale whose revenue, units × unit_value, is beyond 2^53 − 1 IQD', async () => {
    // 3 × 3,002,399,751,580,331 = 9,007,199,254,740,993: a float would post …992.
    const sale = (unitValue: number) => ({
      reason: 'r',
      category: 'external_sale',
      unit_value: unitValue,
      items: [{ external_sku: sku, delta: -3 }],
    });
    await expectInvalid(s, sale(3_002_399_751_580_331), [{ field: 'unit_value', issue: 'invalid' }]);
    const fits = await s.api.adjust(sale(3_002_399_751_580_330));
    expect(fits.status).toBe(200);
    const revenue = (await ledger(s.seller_id)).filter((e) => e.adjustment_id === fits.body.data[0].adjustment_id);
    expect(revenue).toEqual([
      expect.objectContaining({ kind: 'external_sale_revenue', amount: 9_007_199_254_740_990 }),
    ]);
  });

  it('refuses (delta invalid) a damaged write-off whose cost, units × unit cost, is beyond 2^53 − 1 IQD', async () => {
    await ops(stack.db, 'product', 'set-unit-cost', '--seller', s.seller_id, '--sku', sku, '--cost', String(2 ** 52));
    try {
      await expectInvalid(s, { reason: 'r', category: 'damaged', items: [{ external_sku: sku, delta: -2 }] }, [
        { field: 'items[0].delta', issue: 'invalid' },
      ]);
    } finally {
      await ops(stack.db, 'product', 'set-unit-cost', '--seller', s.seller_id, '--sku', sku, '--cost', '1000');
    }
  });

  it('treats unit_value null as not sent', async () => {
    const res = await s.api.adjust({ reason: 'r', category: 'damaged', unit_value: null, items: [item()] });
    expect(res.status).toBe(200);
  });

  it('requires 1 to 100 items (missing, invalid, empty, too_many)', async () => {
    await expectInvalid(s, { reason: 'r', category: 'damaged' }, [{ field: 'items', issue: 'missing' }]);
    await expectInvalid(s, { reason: 'r', category: 'damaged', items: 'x' }, [{ field: 'items', issue: 'invalid' }]);
    await expectInvalid(s, adjustment([]), [{ field: 'items', issue: 'empty' }]);
    const many = Array.from({ length: 101 }, (_, i) => ({ external_sku: `S${i}`, delta: 1 }));
    await expectInvalid(s, adjustment(many), [{ field: 'items', issue: 'too_many' }]);
  });

  it('takes exactly 100 items', async () => {
    const items = Array.from({ length: 100 }, (_, i) => ({ external_sku: `UNKNOWN-${i}`, delta: 1 }));
    const res = await s.api.adjust(adjustment(items));
    expect(res.status).toBe(404); // past the body check: the SKUs are unknown
  });

  it('requires external_sku on every item (missing)', async () => {
    await expectInvalid(s, adjustment([{ delta: 1 }, { external_sku: '', delta: 1 }, 'x']), [
      { field: 'items[0].external_sku', issue: 'missing' },
      { field: 'items[1].external_sku', issue: 'missing' },
      { field: 'items[2]', issue: 'invalid' },
    ]);
  });

  it.each([0, 1.5, '1', null, 3_000_000_000])('requires delta to be a non-zero integer (%p)', async (delta) => {
    await expectInvalid(s, adjustment([{ external_sku: sku, delta }]), [
      { field: 'items[0].delta', issue: delta === null ? 'missing' : 'invalid' },
    ]);
  });

  it('refuses a SKU repeated in the request (duplicate_variant)', async () => {
    await expectInvalid(
      s,
      adjustment([
        { external_sku: sku, delta: 1 },
        { external_sku: sku, delta: -1 },
      ]),
      [{ field: 'items[1].external_sku', issue: 'duplicate_variant' }],
    );
  });

  it('refuses a location_id that is not a non-blank string (invalid)', async () => {
    await expectInvalid(s, adjustment([{ external_sku: sku, delta: 1, location_id: 7 }]), [
      { field: 'items[0].location_id', issue: 'invalid' },
    ]);
  });

  it('lists every problem of the body at once', async () => {
    await expectInvalid(s, { category: 'nope', unit_value: 1, items: [{ external_sku: sku }] }, [
      { field: 'reason', issue: 'missing' },
      { field: 'category', issue: 'invalid' },
      { field: 'unit_value', issue: 'not_applicable' },
      { field: 'items[0].delta', issue: 'missing' },
    ]);
  });

  it('refuses text Postgres cannot hold (U+0000) as invalid rather than failing', async () => {
    await expectInvalid(
      s,
      { reason: 'a\u0000b', category: 'damaged', items: [{ external_sku: 'x\u0000', delta: 1 }] },
      [
        { field: 'reason', issue: 'invalid' },
        { field: 'items[0].external_sku', issue: 'invalid' },
      ],
    );
  });
});

describe('POST /inventory/adjustments: check order (key, scope, Idempotency-Key, stored outcome, body, SKUs and locations, write)', () => {
  it('checks the key first', async () => {
    const res = await call(stack.baseUrl, 'POST', '/partner/v1/inventory/adjustments', { body: {} });
    expect(res.status).toBe(401);
  });

  it('checks the scope (inventory:write) before the Idempotency-Key', async () => {
    const s = await seller({ scopes: ['catalog:read', 'catalog:write'] });
    const res = await s.api.adjust({}, null);
    expect(res.status).toBe(403);
    expect(res.body.error).toMatchObject({
      code: 'insufficient_scope',
      message: expect.stringContaining('inventory:write'),
    });
  });

  it('checks the Idempotency-Key before the body (missing: idempotency_key_required; over 255: validation_error)', async () => {
    const s = await seller();
    const missing = await s.api.adjust({}, null);
    expect(missing.status).toBe(400);
    expect(missing.body.error.code).toBe('idempotency_key_required');
    const long = await s.api.adjust({}, 'k'.repeat(256));
    expect(long.status).toBe(400);
    expect(long.body.error).toMatchObject({
      code: 'validation_error',
      details: [{ field: 'Idempotency-Key', issue: 'invalid' }],
    });
  });

  it('checks the stored outcome before the body: a used key with another (invalid) body is 409 idempotency_key_conflict', async () => {
    const s = await seller();
    const sku = await product(s);
    const key = idemKey();
    await s.api.adjust(adjustment([{ external_sku: sku, delta: 1 }]), key);
    const res = await s.api.adjust({ reason: 'r' }, key);
    expect(res.status).toBe(409);
    expect(res.body.error.code).toBe('idempotency_key_conflict');
  });

  it('checks the body before SKUs and locations (400, not 404)', async () => {
    const s = await seller();
    const res = await s.api.adjust({ reason: 'r', category: 'bogus', items: [{ external_sku: 'UNKNOWN', delta: 1 }] });
    expect(res.status).toBe(400);
  });

  it('checks SKUs and locations before the write (404, not 422)', async () => {
    const s = await seller();
    const sku = await product(s, 0);
    const res = await s.api.adjust(
      adjustment([
        { external_sku: sku, delta: -5 },
        { external_sku: 'UNKNOWN', delta: 1 },
      ]),
    );
    expect(res.status).toBe(404);
  });

  it('checks SKUs before the missing stock location (404, not 422)', async () => {
    const s = await seller({ locations: 0 });
    const res = await s.api.adjust(adjustment([{ external_sku: 'UNKNOWN', delta: 1 }]));
    expect(res.status).toBe(404);
  });

  it('has no rate limit', async () => {
    stack.clock.freeze(new Date(Math.ceil(Date.now() / 600_000) * 600_000 + 1_000));
    try {
      const s = await seller();
      const sku = await product(s, 0);
      for (let i = 0; i < 65; i++) {
        expect((await s.api.adjust(adjustment([{ external_sku: sku, delta: 1 }]))).status).toBe(200);
      }
      expect(await level(s, sku)).toBe(65);
    } finally {
      stack.clock.unfreeze();
    }
  });
});

describe('POST /inventory/adjustments: idempotency', () => {
  it('returns the stored response on a replay, and stock moves once', async () => {
    const s = await seller();
    const sku = await product(s, 10);
    const key = idemKey();
    const body = adjustment([{ external_sku: sku, delta: -3 }]);
    const first = await s.api.adjust(body, key);
    const second = await s.api.adjust(body, key);
    expect(second.status).toBe(200);
    expect(second.headers.get('idempotent-replayed')).toBe('true');
    expect(second.body).toEqual(first.body);
    expect(await level(s, sku)).toBe(7);
  });

  it('compares bodies as JSON: member order and whitespace do not matter', async () => {
    const s = await seller();
    const sku = await product(s, 10);
    const key = idemKey();
    await s.api.adjust({ reason: 'r', category: 'damaged', items: [{ external_sku: sku, delta: -1 }] }, key);
    const rawBody = `{ "items" : [ { "delta" : -1 , "external_sku" : "${sku}" } ],\n  "category":"damaged", "reason":"r" }`;
    const res = await call(stack.baseUrl, 'POST', '/partner/v1/inventory/adjustments', {
      key: s.key,
      idempotencyKey: key,
      rawBody,
    });
    expect(res.status).toBe(200);
    expect(res.headers.get('idempotent-replayed')).toBe('true');
    expect(await level(s, sku)).toBe(9);
  });

  it('stores nothing for a 404 or 422, so the same key can be resent once fixed', async () => {
    const s = await seller();
    const sku = await product(s, 0);
    const key = idemKey();
    expect((await s.api.adjust(adjustment([{ external_sku: `${sku}-typo`, delta: 2 }]), key)).status).toBe(404);
    expect((await s.api.adjust(adjustment([{ external_sku: sku, delta: -2 }]), key)).status).toBe(422);
    const fixed = await s.api.adjust(adjustment([{ external_sku: sku, delta: 2 }]), key);
    expect(fixed.status).toBe(200);
    expect(fixed.headers.get('idempotent-replayed')).toBeNull();
    expect(await level(s, sku)).toBe(2);
  });

  it('stores a 500 and replays it; the failed request wrote nothing', async () => {
    const s = await seller();
    const sku = await product(s, 10, FAIL_AUDIT);
    const key = idemKey();
    const body = adjustment([{ external_sku: sku, delta: -1 }]);
    const first = await s.api.adjust(body, key);
    expect(first.status).toBe(500);
    expect(first.body.error).toEqual({
      code: 'internal_error',
      message: expect.any(String),
      request_id: expect.any(String),
    });
    const replay = await s.api.adjust(body, key);
    expect(replay.status).toBe(500);
    expect(replay.headers.get('idempotent-replayed')).toBe('true');
    expect(replay.body).toEqual(first.body);
    expect(await level(s, sku)).toBe(10);
  });
});

describe('POST /inventory/adjustments: bookkeeping and `ledger list`', () => {
  it('books outside-sale revenue and cost of goods for external_sale with a negative delta and unit_value', async () => {
    const s = await seller();
    const [costed, uncosted] = [await product(s, 10), await product(s, 10)];
    await ops(stack.db, 'product', 'set-unit-cost', '--seller', s.seller_id, '--sku', costed, '--cost', '3000');
    const res = await s.api.adjust({
      reason: 'Sold in shop',
      category: 'external_sale',
      unit_value: 7500,
      items: [
        { external_sku: costed, delta: -2 },
        { external_sku: uncosted, delta: -3 },
      ],
    });
    expect(res.status).toBe(200);
    const entries = await ledger(s.seller_id);
    expect(entries.map((e) => [e.kind, e.external_sku, e.amount]).sort()).toEqual(
      [
        ['external_sale_revenue', costed, 15000],
        ['external_sale_cogs', costed, 6000],
        ['external_sale_revenue', uncosted, 22500],
      ].sort(),
    );
  });

  it('books a cost write-off for damaged with a negative delta when the unit cost is known', async () => {
    const s = await seller();
    const [costed, uncosted] = [await product(s, 10), await product(s, 10)];
    await ops(stack.db, 'product', 'set-unit-cost', '--seller', s.seller_id, '--sku', costed, '--cost', '1250');
    await s.api.adjust({
      reason: 'Water damage',
      category: 'damaged',
      items: [
        { external_sku: costed, delta: -4 },
        { external_sku: uncosted, delta: -1 },
      ],
    });
    expect((await ledger(s.seller_id)).map((e) => [e.kind, e.external_sku, e.amount])).toEqual([
      ['damaged_write_off', costed, 5000],
    ]);
  });

  it('books nothing for a positive delta, an external_sale without unit_value, or correction and received', async () => {
    const s = await seller();
    const sku = await product(s, 10);
    await ops(stack.db, 'product', 'set-unit-cost', '--seller', s.seller_id, '--sku', sku, '--cost', '100');
    await s.api.adjust({
      reason: 'r',
      category: 'external_sale',
      unit_value: 500,
      items: [{ external_sku: sku, delta: 2 }],
    });
    await s.api.adjust({ reason: 'r', category: 'external_sale', items: [{ external_sku: sku, delta: -1 }] });
    await s.api.adjust({ reason: 'r', category: 'damaged', items: [{ external_sku: sku, delta: 1 }] });
    await s.api.adjust({ reason: 'r', category: 'correction', items: [{ external_sku: sku, delta: -1 }] });
    await s.api.adjust({ reason: 'r', category: 'received', items: [{ external_sku: sku, delta: 5 }] });
    expect(await ledger(s.seller_id)).toEqual([]);
  });

  it('never fails the adjustment when bookkeeping fails', async () => {
    const s = await seller();
    const sku = await product(s, 10, FAIL_BOOKS);
    const res = await s.api.adjust({
      reason: 'r',
      category: 'external_sale',
      unit_value: 100,
      items: [{ external_sku: sku, delta: -1 }],
    });
    expect(res.status).toBe(200);
    expect(await level(s, sku)).toBe(9);
    expect(await ledger(s.seller_id)).toEqual([]);
  });

  it('`ledger list --seller` prints entries newest first with kind, amount, external_sku and created_at', async () => {
    const s = await seller();
    const [first, second] = [await product(s, 10), await product(s, 10)];
    await ops(stack.db, 'product', 'set-unit-cost', '--seller', s.seller_id, '--sku', first, '--cost', '10');
    await s.api.adjust({ reason: 'r', category: 'damaged', items: [{ external_sku: first, delta: -1 }] });
    await s.api.adjust({
      reason: 'r',
      category: 'external_sale',
      unit_value: 99,
      items: [{ external_sku: second, delta: -1 }],
    });
    const doc = await ops(stack.db, 'ledger', 'list', '--seller', s.seller_id);
    expect(doc.entries).toEqual([
      expect.objectContaining({
        kind: 'external_sale_revenue',
        amount: 99,
        external_sku: second,
        created_at: expect.stringMatching(/Z$/),
      }),
      expect.objectContaining({
        kind: 'damaged_write_off',
        amount: 10,
        external_sku: first,
        created_at: expect.stringMatching(/Z$/),
      }),
    ]);
  });

  it('`ledger list` refuses an unknown seller with seller_not_found', async () => {
    const settings = loadSettings({ DATABASE_URL: 'postgres://unused@127.0.0.1/unused', LOG_LEVEL: 'silent' });
    const result = await run(['ledger', 'list', '--seller', 'sel_nope', '--json'], { db: stack.db, settings });
    expect(result.exitCode).toBe(1);
    expect(JSON.parse(result.stdout)).toEqual({ error: { code: 'seller_not_found', message: expect.any(String) } });
  });
});

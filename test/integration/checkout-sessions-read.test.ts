import { encodeCursor } from '../../src/http/cursor';
import { randomString } from '../../src/lib/ids';
import { checkoutScopes, CheckoutScope } from '../../src/keys/scopes';
import { createCheckoutKey } from '../../src/ops/checkout-keys';
import { setMerchantMethod } from '../../src/ops/merchant-methods';
import { buildMerchant } from '../helpers/factories';
import { call, TestResponse } from '../helpers/http';
import { startStack, Stack } from '../helpers/stack';
import { decodeEventRow } from '../../src/checkout/event-payload';

/** Session reads, the session list, `/expire`, `GET /v1/payment_methods`, isolation and scopes. */
let stack: Stack;
beforeAll(async () => {
  stack = await startStack();
});
afterAll(() => stack.stop());

function sessionBody(over: Record<string, unknown> = {}): Record<string, any> {
  return {
    reference_id: `order-${randomString(12)}`,
    amount: 15000,
    currency: 'IQD',
    line_items: [{ label: 'Mug', amount: 15000, type: 'charge' }],
    success_url: 'https://shop.example.com/done',
    ...over,
  };
}

const create = async (key: string, over: Record<string, unknown> = {}) => {
  const res = await call(stack.baseUrl, 'POST', '/v1/checkout/sessions', {
    key,
    body: sessionBody(over),
    idempotencyKey: `idem_${randomString(16)}`,
  });
  if (res.status !== 201) throw new Error(`create answered ${res.status}: ${res.text}`);
  return res.body;
};
const get = (key: string, path: string) => call(stack.baseUrl, 'GET', path, { key });
const expire = (key: string, id: string) => call(stack.baseUrl, 'POST', `/v1/checkout/sessions/${id}/expire`, { key });
const list = (key: string, query = '') => get(key, `/v1/checkout/sessions${query}`);
const ids = (res: TestResponse) => res.body.data.map((s: { id: string }) => s.id);

function expectError(res: TestResponse, status: number, code: string, details: unknown[] = []) {
  expect({ status: res.status, code: res.body?.error?.code, details: res.body?.error?.details }).toEqual({
    status,
    code,
    details,
  });
}

/**
 * Creates `n` sessions one second apart on a frozen clock, each at its own price (so a shared
 * reference_id replaces rather than returns the earlier one); returns them oldest first.
 */
async function createSpaced(key: string, n: number, over: Record<string, unknown> = {}) {
  const start = new Date(Math.floor(Date.now() / 1000) * 1000);
  const made = [];
  stack.clock.freeze(start);
  try {
    for (let i = 0; i < n; i++) {
      const amount = 15000 + i;
      made.push(await create(key, { amount, line_items: [{ label: 'Mug', amount, type: 'charge' }], ...over }));
      stack.clock.advance(1000);
    }
  } finally {
    stack.clock.unfreeze();
  }
  return made;
}

describe('GET /v1/checkout/sessions/{id}', () => {
  it('answers 200 with the session as created', async () => {
    const m = await buildMerchant(stack.db);
    const session = await create(m.secretKey);
    const res = await get(m.secretKey, `/v1/checkout/sessions/${session.id}`);
    expect(res.status).toBe(200);
    expect(res.body).toEqual(session);
  });

  it('is authoritative: it shows a transition as soon as it is made', async () => {
    const m = await buildMerchant(stack.db);
    const session = await create(m.secretKey);
    await expire(m.secretKey, session.id);
    expect((await get(m.secretKey, `/v1/checkout/sessions/${session.id}`)).body.status).toBe('expired');
  });

  it("answers 404 session_not_found for another merchant's session", async () => {
    const a = await buildMerchant(stack.db);
    const b = await buildMerchant(stack.db);
    const session = await create(a.secretKey);
    expectError(await get(b.secretKey, `/v1/checkout/sessions/${session.id}`), 404, 'session_not_found');
  });

  it("answers 404 session_not_found for the other mode's session of the same merchant", async () => {
    const m = await buildMerchant(stack.db);
    const live = await createCheckoutKey(stack.db, { merchantId: m.merchantId, mode: 'live', type: 'secret' });
    const testSession = await create(m.secretKey);
    const liveSession = await create(live.key);
    expectError(await get(live.key, `/v1/checkout/sessions/${testSession.id}`), 404, 'session_not_found');
    expectError(await get(m.secretKey, `/v1/checkout/sessions/${liveSession.id}`), 404, 'session_not_found');
  });

  it('answers 404 session_not_found for an id that does not exist, whatever it looks like', async () => {
    const m = await buildMerchant(stack.db);
    for (const id of ['cs_test_nothing', 'cs_%00', `cs_${'x'.repeat(200)}`, '%F0%9F%92%B3']) {
      expectError(await get(m.secretKey, `/v1/checkout/sessions/${id}`), 404, 'session_not_found');
      expectError(await expire(m.secretKey, id), 404, 'session_not_found');
    }
  });
});

describe('POST /v1/checkout/sessions/{id}/expire', () => {
  it('expires an open session: 200 with the expired session, and its checkout.session.expired event', async () => {
    const m = await buildMerchant(stack.db);
    const session = await create(m.secretKey);
    const at = new Date(Date.now() + 60_000);
    stack.clock.freeze(at);
    let res: TestResponse;
    try {
      res = await expire(m.secretKey, session.id);
    } finally {
      stack.clock.unfreeze();
    }
    expect(res.status).toBe(200);
    expect(res.body).toEqual({ ...session, status: 'expired', updated_at: at.toISOString() });
    const events = (
      await stack.db('events').where({ merchant_id: m.merchantId, type: 'checkout.session.expired' })
    ).map(decodeEventRow);
    expect(events).toHaveLength(1);
    expect(events[0].data_object).toEqual(res.body);
    expect(new Date(events[0].created_at).toISOString()).toBe(at.toISOString());
  });

  it('answers 409 session_not_open for a session that is no longer open, and writes no event', async () => {
    const m = await buildMerchant(stack.db);
    const session = await create(m.secretKey);
    await expire(m.secretKey, session.id);
    expectError(await expire(m.secretKey, session.id), 409, 'session_not_open');
    expect(await stack.db('events').where({ merchant_id: m.merchantId })).toHaveLength(1);
  });

  it.each(['processing', 'completed', 'canceled'])('answers 409 session_not_open for a %s session', async (status) => {
    const m = await buildMerchant(stack.db);
    const session = await create(m.secretKey);
    await stack.db('checkout_sessions').where({ id: session.id }).update({ status });
    expectError(await expire(m.secretKey, session.id), 409, 'session_not_open');
    expect((await get(m.secretKey, `/v1/checkout/sessions/${session.id}`)).body.status).toBe(status);
  });

  it("answers 404 session_not_found for another merchant's or mode's session, and leaves it open", async () => {
    const a = await buildMerchant(stack.db);
    const b = await buildMerchant(stack.db);
    const aLive = await createCheckoutKey(stack.db, { merchantId: a.merchantId, mode: 'live', type: 'secret' });
    const session = await create(a.secretKey);
    expectError(await expire(b.secretKey, session.id), 404, 'session_not_found');
    expectError(await expire(aLive.key, session.id), 404, 'session_not_found');
    expectError(await expire(a.secretKey, 'cs_test_nothing'), 404, 'session_not_found');
    expect((await get(a.secretKey, `/v1/checkout/sessions/${session.id}`)).body.status).toBe('open');
  });

  it('takes no Idempotency-Key', async () => {
    const m = await buildMerchant(stack.db);
    const session = await create(m.secretKey);
    const res = await expire(m.secretKey, session.id);
    expect(res.status).toBe(200);
    expect(res.headers.get('idempotent-replayed')).toBeNull();
  });
});

describe('GET /v1/checkout/sessions', () => {
  it('lists newest first, default limit 20, next_cursor null on the last page', async () => {
    const m = await buildMerchant(stack.db);
    const made = await createSpaced(m.secretKey, 21);
    const first = await list(m.secretKey);
    expect(first.status).toBe(200);
    expect(ids(first)).toEqual(
      made
        .slice(1)
        .reverse()
        .map((s) => s.id),
    );
    expect(first.body.next_cursor).toEqual(expect.any(String));
    expect(first.body.data[0]).toEqual(made[20]);
    const last = await list(m.secretKey, `?cursor=${first.body.next_cursor}`);
    expect(ids(last)).toEqual([made[0].id]);
    expect(last.body.next_cursor).toBeNull();
  });

  it('pages with limit and cursor without gaps or repeats; a full last page has next_cursor null', async () => {
    const m = await buildMerchant(stack.db);
    const made = (await createSpaced(m.secretKey, 4)).reverse();
    const one = await list(m.secretKey, '?limit=2');
    const two = await list(m.secretKey, `?limit=2&cursor=${one.body.next_cursor}`);
    expect(ids(one)).toEqual([made[0].id, made[1].id]);
    expect(ids(two)).toEqual([made[2].id, made[3].id]);
    expect(two.body.next_cursor).toBeNull();
  });

  it.each([
    ['sessions', '/v1/checkout/sessions'],
    ['refunds', '/v1/refunds'],
    ['events', '/v1/events'],
  ])('refuses a forged %s cursor whose id holds U+0000 with 400 validation_error', async (name, path) => {
    const m = await buildMerchant(stack.db);
    const forged = encodeCursor(name, [new Date().toISOString(), 'cs_test_\u0000']);
    const res = await get(m.secretKey, `${path}?cursor=${forged}`);
    expect({ status: res.status, code: res.body.error?.code, details: res.body.error?.details }).toEqual({
      status: 400,
      code: 'validation_error',
      details: [{ field: 'cursor', issue: 'invalid' }],
    });
  });

  it('filters by reference_id', async () => {
    const m = await buildMerchant(stack.db);
    const [a1, a2] = await createSpaced(m.secretKey, 2, { reference_id: 'ref-a' });
    await createSpaced(m.secretKey, 1, { reference_id: 'ref-b' });
    expect(ids(await list(m.secretKey, '?reference_id=ref-a'))).toEqual([a2.id, a1.id]);
  });

  it('filters by status', async () => {
    const m = await buildMerchant(stack.db);
    const [s1, s2, s3] = await createSpaced(m.secretKey, 3);
    await expire(m.secretKey, s2.id);
    expect(ids(await list(m.secretKey, '?status=open'))).toEqual([s3.id, s1.id]);
    expect(ids(await list(m.secretKey, '?status=expired'))).toEqual([s2.id]);
    expect(ids(await list(m.secretKey, '?status=completed'))).toEqual([]);
  });

  it('takes created_after as exclusive', async () => {
    const m = await buildMerchant(stack.db);
    const [, s2, s3] = await createSpaced(m.secretKey, 3);
    expect(ids(await list(m.secretKey, `?created_after=${s2.created_at}`))).toEqual([s3.id]);
    const justBefore = new Date(new Date(s2.created_at).getTime() - 1).toISOString();
    expect(ids(await list(m.secretKey, `?created_after=${justBefore}`))).toEqual([s3.id, s2.id]);
  });

  it('keeps filters across pages', async () => {
    const m = await buildMerchant(stack.db);
    const made = await createSpaced(m.secretKey, 5, { reference_id: 'paged' });
    await createSpaced(m.secretKey, 2, { reference_id: 'other' });
    const seen: string[] = [];
    let cursor: string | null = '';
    while (cursor !== null) {
      const res: TestResponse = await list(m.secretKey, `?reference_id=paged&limit=2&cursor=${cursor}`);
      expect(res.status).toBe(200);
      seen.push(...ids(res));
      cursor = res.body.next_cursor;
    }
    expect(seen).toEqual(made.map((s) => s.id).reverse());
  });

  it.each(['0', '101', '1.5', 'ten', ''])('refuses limit=%s with 400 validation_error', async (limit) => {
    const m = await buildMerchant(stack.db);
    const res = await list(m.secretKey, `?limit=${limit}`);
    expectError(res, 400, 'validation_error', [{ field: 'limit', issue: 'limit must be an integer from 1 to 100' }]);
  });

  it('accepts limit=1 and limit=100', async () => {
    const m = await buildMerchant(stack.db);
    await createSpaced(m.secretKey, 2);
    expect((await list(m.secretKey, '?limit=1')).body.data).toHaveLength(1);
    expect((await list(m.secretKey, '?limit=100')).body.data).toHaveLength(2);
  });

  it('refuses a cursor that is not one of this list, or was tampered with, with 400 validation_error', async () => {
    const m = await buildMerchant(stack.db);
    const events = Buffer.from(JSON.stringify({ v: 2, l: 'events', k: ['2026-01-01T00:00:00.000Z', 'x'] }));
    const cursor = (k: unknown[]) => Buffer.from(JSON.stringify({ v: 2, l: 'sessions', k })).toString('base64url');
    const tampered = [cursor(['not-a-date', 'cs_test_x']), cursor(['2026-13-45T99:00:00.000Z', 'x']), cursor([1, 'x'])];
    for (const cursor of ['garbage!', 'eyJ2IjoxfQ', events.toString('base64url'), ...tampered]) {
      const res = await list(m.secretKey, `?cursor=${cursor}`);
      expectError(res, 400, 'validation_error', [{ field: 'cursor', issue: 'invalid' }]);
    }
  });

  it('refuses unknown parameters, a reference_id over 128 characters, an unknown status and a created_after that is not a date-time', async () => {
    const m = await buildMerchant(stack.db);
    expectError(await list(m.secretKey, '?sort=asc'), 400, 'validation_error', [
      { field: 'sort', issue: 'Unrecognized key' },
    ]);
    const res = await list(m.secretKey, `?reference_id=${'r'.repeat(129)}&status=paid&created_after=yesterday`);
    expectError(await list(m.secretKey, '?reference_id=a%00b'), 400, 'validation_error', [
      { field: 'reference_id', issue: 'Must be valid Unicode text without U+0000' },
    ]);
    expect(res.status).toBe(400);
    expect(res.body.error.details.map((d: { field: string }) => d.field)).toEqual([
      'reference_id',
      'status',
      'created_after',
    ]);
  });

  it("never lists another merchant's or the other mode's sessions", async () => {
    const a = await buildMerchant(stack.db);
    const b = await buildMerchant(stack.db);
    const aLive = await createCheckoutKey(stack.db, { merchantId: a.merchantId, mode: 'live', type: 'secret' });
    const [aTest] = await createSpaced(a.secretKey, 1, { reference_id: 'shared-ref' });
    const [aLiveSession] = await createSpaced(aLive.key, 1, { reference_id: 'shared-ref' });
    const [bTest] = await createSpaced(b.secretKey, 1, { reference_id: 'shared-ref' });
    expect(ids(await list(a.secretKey, '?reference_id=shared-ref'))).toEqual([aTest.id]);
    expect(ids(await list(aLive.key, '?reference_id=shared-ref'))).toEqual([aLiveSession.id]);
    expect(ids(await list(b.secretKey))).toEqual([bTest.id]);
  });
});

describe('GET /v1/payment_methods', () => {
  it('lists the methods in display order with enabled per merchant and mode (test mode)', async () => {
    const m = await buildMerchant(stack.db);
    const res = await get(m.secretKey, '/v1/payment_methods');
    expect(res.status).toBe(200);
    expect(res.body.data.map((x: { code: string; enabled: boolean }) => [x.code, x.enabled])).toEqual([
      ['test', true],
      ['cashondelivery', true],
      ['card', false],
      ['zaincash', false],
      ['fastpay', false],
    ]);
  });

  it('leaves test out in live mode and follows the merchant settings of that mode', async () => {
    const m = await buildMerchant(stack.db);
    await setMerchantMethod(stack.db, { merchantId: m.merchantId, mode: 'live', code: 'card', enabled: true });
    const live = await createCheckoutKey(stack.db, { merchantId: m.merchantId, mode: 'live', type: 'secret' });
    const res = await get(live.key, '/v1/payment_methods');
    expect(res.body.data.map((x: { code: string; enabled: boolean }) => [x.code, x.enabled])).toEqual([
      ['cashondelivery', true],
      ['card', true],
      ['zaincash', false],
      ['fastpay', false],
    ]);
  });

  it('gives each method display names in ar, ku and en, flow, currencies, limits and capabilities', async () => {
    const m = await buildMerchant(stack.db);
    const res = await get(m.secretKey, '/v1/payment_methods');
    for (const method of res.body.data) {
      expect(Object.keys(method)).toEqual([
        'code',
        'display_name',
        'flow',
        'currencies',
        'limits',
        'capabilities',
        'enabled',
      ]);
      expect(Object.keys(method.display_name)).toEqual(['ar', 'ku', 'en']);
      for (const name of Object.values(method.display_name)) expect(name).toEqual(expect.stringMatching(/\S/));
      expect(Object.keys(method.limits).sort()).toEqual([...method.currencies].sort());
      expect(method.capabilities).toEqual({
        refunds: expect.any(String),
        saved_instruments: expect.any(Boolean),
        wallets: expect.any(Array),
      });
    }
    expect(res.body.data[1]).toEqual({
      code: 'cashondelivery',
      display_name: { ar: 'الدفع عند الاستلام', ku: 'پارەدان لە کاتی گەیاندن', en: 'Cash on delivery' },
      flow: 'offline',
      currencies: ['IQD'],
      limits: { IQD: { min: 1, max: 5_000_000 } },
      capabilities: { refunds: 'none', saved_instruments: false, wallets: [] },
      enabled: true,
    });
  });
});

describe('scopes', () => {
  const routes: Array<[string, CheckoutScope, (key: string) => Promise<TestResponse>]> = [
    [
      'POST /checkout/sessions',
      'sessions:write',
      (key) =>
        call(stack.baseUrl, 'POST', '/v1/checkout/sessions', {
          key,
          body: sessionBody(),
          idempotencyKey: 'scope-key-1',
        }),
    ],
    ['POST /checkout/sessions/{id}/expire', 'sessions:write', (key) => expire(key, 'cs_test_nothing')],
    ['GET /checkout/sessions', 'sessions:read', (key) => list(key)],
    ['GET /checkout/sessions/{id}', 'sessions:read', (key) => get(key, '/v1/checkout/sessions/cs_test_nothing')],
    ['GET /payment_methods', 'sessions:read', (key) => get(key, '/v1/payment_methods')],
    ['GET /events', 'events:read', (key) => get(key, '/v1/events')],
    ['GET /events/{id}', 'events:read', (key) => get(key, '/v1/events/evt_test_nothing')],
  ];

  it.each(routes)(
    '%s needs %s: 403 insufficient_scope naming it without, allowed with it alone',
    async (_route, scope, send) => {
      const without = await buildMerchant(stack.db, { scopes: checkoutScopes.filter((s) => s !== scope) });
      const refused = await send(without.secretKey);
      expectError(refused, 403, 'insufficient_scope');
      expect(refused.body.error.message).toContain(scope);
      const only = await buildMerchant(stack.db, { scopes: [scope] });
      expect((await send(only.secretKey)).status).not.toBe(403);
    },
  );
});

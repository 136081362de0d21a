import type { AddressInfo } from 'node:net';
import { createServer } from 'node:http';
import { Client } from '@temporalio/client';
import { createApp } from '../../src/app';
import { randomString } from '../../src/lib/ids';
import { createCheckoutKey } from '../../src/ops/checkout-keys';
import { buildMerchant } from '../helpers/factories';
import { call, TestResponse } from '../helpers/http';
import { startStack, Stack } from '../helpers/stack';
import { eventsAbout } from '../helpers/events';

/**
 * `POST /v1/checkout/sessions`: Idempotency-Key semantics on the real route, and reconciliation on
 * (merchant, mode, reference_id), which works independently of the key.
 */
let stack: Stack;
beforeAll(async () => {
  stack = await startStack();
});
afterAll(() => stack.stop());

const idem = () => `idem_${randomString(16)}`;

function sessionBody(over: Record<string, unknown> = {}): Record<string, any> {
  return {
    reference_id: `order-${randomString(12)}`,
    amount: 25000,
    currency: 'IQD',
    line_items: [
      { label: 'Lamp', amount: 22000, type: 'charge' },
      { label: 'Delivery', amount: 3000, type: 'shipping' },
    ],
    success_url: 'https://shop.example.com/done',
    ...over,
  };
}

/** `idempotencyKey` null sends none. */
const create = (key: string, body: unknown, idempotencyKey: string | null = idem()) =>
  call(stack.baseUrl, 'POST', '/v1/checkout/sessions', { key, body, idempotencyKey: idempotencyKey ?? undefined });
const read = (key: string, id: string) => call(stack.baseUrl, 'GET', `/v1/checkout/sessions/${id}`, { key });

function expectError(res: TestResponse, status: number, code: string, details: unknown[] = []) {
  expect({ status: res.status, code: res.body?.error?.code, details: res.body?.error?.details }).toEqual({
    status,
    code,
    details,
  });
}

/** Sessions and expired events of one reference id, straight from Postgres. */
const sessionsOf = (merchantId: string, referenceId: string) =>
  stack.db('checkout_sessions').where({ merchant_id: merchantId, reference_id: referenceId }).orderBy('created_at');
const expiredEventsOf = (sessionId: string) => eventsAbout(stack.db, sessionId, 'checkout.session.expired');

describe('Idempotency-Key on create', () => {
  it('is required: 400 idempotency_key_required without one', async () => {
    const m = await buildMerchant(stack.db);
    const res = await create(m.secretKey, sessionBody(), null);
    expectError(res, 400, 'idempotency_key_required', [{ field: 'Idempotency-Key', issue: 'missing' }]);
  });

  it('must be 8 to 128 characters of A-Za-z0-9_-: 400 idempotency_key_required otherwise', async () => {
    const m = await buildMerchant(stack.db);
    for (const key of ['short', 'a'.repeat(129), 'has spaces in it', 'dots.are.out']) {
      const res = await create(m.secretKey, sessionBody(), key);
      expectError(res, 400, 'idempotency_key_required', [{ field: 'Idempotency-Key', issue: 'invalid' }]);
    }
  });

  it('replays the first 201 with Idempotent-Replayed: true and creates nothing more', async () => {
    const m = await buildMerchant(stack.db);
    const key = idem();
    const body = sessionBody();
    const first = await create(m.secretKey, body, key);
    const again = await create(m.secretKey, { ...body }, key);
    expect(first.status).toBe(201);
    expect(first.headers.get('idempotent-replayed')).toBeNull();
    expect(again.status).toBe(201);
    expect(again.headers.get('idempotent-replayed')).toBe('true');
    expect(again.body).toEqual(first.body);
    expect(await sessionsOf(m.merchantId, body.reference_id)).toHaveLength(1);
  });

  it('replays the stored response even after the session has changed', async () => {
    const m = await buildMerchant(stack.db);
    const key = idem();
    const body = sessionBody();
    const first = await create(m.secretKey, body, key);
    await call(stack.baseUrl, 'POST', `/v1/checkout/sessions/${first.body.id}/expire`, { key: m.secretKey });
    const again = await create(m.secretKey, body, key);
    expect(again.headers.get('idempotent-replayed')).toBe('true');
    expect(again.body).toEqual(first.body);
    expect((await read(m.secretKey, first.body.id)).body.status).toBe('expired');
  });

  it('replays a refusal too: a stored 4xx comes back with Idempotent-Replayed: true', async () => {
    const m = await buildMerchant(stack.db);
    const key = idem();
    const body = sessionBody({ amount: 1 });
    const first = await create(m.secretKey, body, key);
    const again = await create(m.secretKey, body, key);
    expectError(again, 400, 'amount_mismatch', [{ field: 'line_items', issue: 'sum_differs' }]);
    expect(again.headers.get('idempotent-replayed')).toBe('true');
    expect(again.body).toEqual(first.body);
  });

  it('answers 409 idempotency_key_conflict to the same key with another body, and creates nothing', async () => {
    const m = await buildMerchant(stack.db);
    const key = idem();
    const body = sessionBody();
    await create(m.secretKey, body, key);
    const other = sessionBody();
    expectError(await create(m.secretKey, other, key), 409, 'idempotency_key_conflict');
    expect(await sessionsOf(m.merchantId, other.reference_id)).toHaveLength(0);
  });

  it('is scoped to merchant and mode: the same key and body elsewhere creates afresh', async () => {
    const a = await buildMerchant(stack.db);
    const b = await buildMerchant(stack.db);
    const aLive = await createCheckoutKey(stack.db, { merchantId: a.merchantId, mode: 'live', type: 'secret' });
    const key = idem();
    const body = sessionBody();
    const ids = new Set<string>();
    for (const secret of [a.secretKey, aLive.key, b.secretKey]) {
      const res = await create(secret, body, key);
      expect(res.status).toBe(201);
      expect(res.headers.get('idempotent-replayed')).toBeNull();
      ids.add(res.body.id);
    }
    expect(ids.size).toBe(3);
  });
});

describe('reconciliation on reference_id', () => {
  it('returns the open session unchanged with 200 when amount, currency and line items are the same', async () => {
    const m = await buildMerchant(stack.db);
    const body = sessionBody();
    const first = await create(m.secretKey, body);
    const again = await create(m.secretKey, body);
    expect(first.status).toBe(201);
    expect(again.status).toBe(200);
    expect(again.headers.get('idempotent-replayed')).toBeNull();
    expect(again.body).toEqual(first.body);
    expect(await expiredEventsOf(first.body.id)).toHaveLength(0);
  });

  it('treats an absent quantity as 1 and ignores key order when comparing the price', async () => {
    const m = await buildMerchant(stack.db);
    const body = sessionBody();
    const first = await create(m.secretKey, body);
    const same = await create(m.secretKey, {
      ...body,
      line_items: [
        { type: 'charge', quantity: 1, amount: 22000, label: 'Lamp' },
        { type: 'shipping', amount: 3000, label: 'Delivery', quantity: 1 },
      ],
    });
    expect(same.status).toBe(200);
    expect(same.body.id).toBe(first.body.id);
  });

  it('returns the open session unchanged when only fields other than the price differ', async () => {
    const m = await buildMerchant(stack.db);
    const body = sessionBody();
    const first = await create(m.secretKey, body);
    const again = await create(m.secretKey, {
      ...body,
      metadata: { note: 'second try' },
      locale: 'en',
      success_url: 'https://shop.example.com/other',
    });
    expect(again.status).toBe(200);
    expect(again.body).toEqual(first.body);
  });

  it.each([
    ['amount', { amount: 26000, line_items: [{ label: 'Lamp', amount: 26000, type: 'charge' }] }],
    ['currency', { currency: 'USD' }],
    [
      'line items',
      {
        line_items: [
          { label: 'Lamp', amount: 11000, quantity: 2, type: 'charge' },
          { label: 'Delivery', amount: 3000, type: 'shipping' },
        ],
      },
    ],
  ])(
    'expires the open session with its event and creates a new one (201) for a different %s',
    async (_what, change) => {
      const m = await buildMerchant(stack.db);
      const body = sessionBody();
      const first = await create(m.secretKey, body);
      const second = await create(m.secretKey, { ...body, ...change });
      expect(second.status).toBe(201);
      expect(second.body.id).not.toBe(first.body.id);
      expect(second.body.status).toBe('open');

      const old = await read(m.secretKey, first.body.id);
      expect(old.body).toMatchObject({ status: 'expired', payment_status: 'unpaid' });
      const events = await expiredEventsOf(first.body.id);
      expect(events).toHaveLength(1);
      expect(events[0].data_object).toEqual(old.body);
      expect((await sessionsOf(m.merchantId, body.reference_id)).map((s) => s.status)).toEqual(['expired', 'open']);
    },
  );

  it('creates a new session once the earlier one is no longer open', async () => {
    const m = await buildMerchant(stack.db);
    const body = sessionBody();
    const first = await create(m.secretKey, body);
    await call(stack.baseUrl, 'POST', `/v1/checkout/sessions/${first.body.id}/expire`, { key: m.secretKey });
    const second = await create(m.secretKey, body);
    expect(second.status).toBe(201);
    expect(second.body.id).not.toBe(first.body.id);
    expect(await expiredEventsOf(first.body.id)).toHaveLength(1); // from /expire, none from the create
  });

  it('replaces an open session whose expires_at has passed before its timer fired, even at the same price', async () => {
    const m = await buildMerchant(stack.db);
    const body = sessionBody();
    const first = await create(m.secretKey, body);
    stack.clock.advance(60 * 60 * 1000);
    try {
      const second = await create(m.secretKey, body);
      expect(second.status).toBe(201);
      expect(second.body.id).not.toBe(first.body.id);
      expect((await read(m.secretKey, first.body.id)).body.status).toBe('expired');
      expect(await expiredEventsOf(first.body.id)).toHaveLength(1);
    } finally {
      stack.clock.advance(-60 * 60 * 1000);
    }
  });

  it('returns a processing session with 200 at the same price', async () => {
    const m = await buildMerchant(stack.db);
    const body = sessionBody();
    const first = await create(m.secretKey, body);
    await stack.db('checkout_sessions').where({ id: first.body.id }).update({ status: 'processing' });
    const again = await create(m.secretKey, body);
    expect(again.status).toBe(200);
    expect(again.body).toMatchObject({ id: first.body.id, status: 'processing' });
  });

  it('refuses another price while the earlier session is processing with 409 session_not_open', async () => {
    const m = await buildMerchant(stack.db);
    const body = sessionBody();
    const first = await create(m.secretKey, body);
    await stack.db('checkout_sessions').where({ id: first.body.id }).update({ status: 'processing' });
    expectError(await create(m.secretKey, { ...body, currency: 'USD' }), 409, 'session_not_open');
    expect((await sessionsOf(m.merchantId, body.reference_id)).map((s) => s.status)).toEqual(['processing']);
    expect(await expiredEventsOf(first.body.id)).toHaveLength(0);
  });

  it('is per merchant and mode: the same reference_id elsewhere creates its own session', async () => {
    const a = await buildMerchant(stack.db);
    const b = await buildMerchant(stack.db);
    const aLive = await createCheckoutKey(stack.db, { merchantId: a.merchantId, mode: 'live', type: 'secret' });
    const body = sessionBody();
    const results = [await create(a.secretKey, body), await create(aLive.key, body), await create(b.secretKey, body)];
    expect(results.map((r) => r.status)).toEqual([201, 201, 201]);
    expect(new Set(results.map((r) => r.body.id)).size).toBe(3);
    expect(results.map((r) => r.body.livemode)).toEqual([false, true, false]);
    expect((await read(a.secretKey, results[0].body.id)).body.status).toBe('open');
  });

  it('never leaves two open sessions: concurrent creates at the same price make one session', async () => {
    const m = await buildMerchant(stack.db);
    const body = sessionBody();
    const results = await Promise.all(Array.from({ length: 8 }, () => create(m.secretKey, body)));
    expect(results.map((r) => r.status).sort()).toEqual([200, 200, 200, 200, 200, 200, 200, 201]);
    expect(new Set(results.map((r) => r.body.id)).size).toBe(1);
    expect(await sessionsOf(m.merchantId, body.reference_id)).toHaveLength(1);
  });

  it('converges concurrent creates with one Idempotency-Key on one session, which every answer names', async () => {
    const m = await buildMerchant(stack.db);
    const body = sessionBody();
    const key = idem();
    const results = await Promise.all(Array.from({ length: 5 }, () => create(m.secretKey, body, key)));
    expect(results.every((r) => r.status === 200 || r.status === 201)).toBe(true);
    expect(new Set(results.map((r) => r.body.id)).size).toBe(1);
    expect(await sessionsOf(m.merchantId, body.reference_id)).toHaveLength(1);
  });

  it('never leaves two open sessions: concurrent creates at different prices leave one open, each other expired once', async () => {
    const m = await buildMerchant(stack.db);
    const base = sessionBody();
    const bodies = Array.from({ length: 8 }, (_, i) => ({
      ...base,
      amount: 1000 + i,
      line_items: [{ label: 'Lamp', amount: 1000 + i, type: 'charge' }],
    }));
    const results = await Promise.all(bodies.map((b) => create(m.secretKey, b)));
    expect(results.map((r) => r.status)).toEqual(Array(8).fill(201));
    const rows = await sessionsOf(m.merchantId, base.reference_id);
    expect(rows).toHaveLength(8);
    expect(rows.filter((r) => r.status === 'open')).toHaveLength(1);
    for (const row of rows.filter((r) => r.status !== 'open')) {
      expect(row.status).toBe('expired');
      expect(await expiredEventsOf(row.id)).toHaveLength(1);
    }
  });
});

describe('the session workflow', () => {
  /** The same app, through a Temporal client that records the id of every workflow start. */
  let recorded: { baseUrl: string; started: string[]; close(): Promise<void> };
  beforeAll(async () => {
    const started: string[] = [];
    const temporal = new Client({
      connection: stack.env.client.connection,
      namespace: stack.env.client.options.namespace,
      interceptors: {
        workflow: [
          {
            startWithDetails: (input, next) => {
              started.push(input.options.workflowId);
              return next(input);
            },
          },
        ],
      },
    });
    const server = createServer(createApp({ ...stack.deps, temporal }).callback());
    await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
    recorded = {
      baseUrl: `http://127.0.0.1:${(server.address() as AddressInfo).port}`,
      started,
      close: () => new Promise((resolve) => server.close(() => resolve())),
    };
  });
  afterAll(() => recorded.close());

  const createVia = (key: string, body: unknown) =>
    call(recorded.baseUrl, 'POST', '/v1/checkout/sessions', { key, body, idempotencyKey: idem() });

  it('is started only for a session that was written: creates that write nothing start none', async () => {
    const m = await buildMerchant(stack.db);
    const body = sessionBody();
    const results = [await createVia(m.secretKey, body)];
    results.push(...(await Promise.all(Array.from({ length: 4 }, () => createVia(m.secretKey, body)))));
    expect(results.map((r) => r.status).sort()).toEqual([200, 200, 200, 200, 201]);
    const refused = await createVia(m.secretKey, { ...body, amount: 1, line_items: [{ label: 'x', amount: 2 }] });
    expect(refused.status).toBe(400);
    // One start, for the one session written (a lost start is healed by the handoff relay).
    expect(recorded.started).toEqual([results[0].body.id]);
  });
});

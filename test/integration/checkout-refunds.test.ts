import { createRefund } from '../../src/checkout/refunds/create-refund';
import { randomString } from '../../src/lib/ids';
import { createCheckoutKey } from '../../src/ops/checkout-keys';
import { setFxRate } from '../../src/ops/fx';
import { buildMerchant } from '../helpers/factories';
import { call, TestResponse } from '../helpers/http';
import { defaultGateways, Gateways, testGateway } from '../../src/checkout/gateways';
import { merchantIdKey, modeKey } from '../../src/temporal/search-attributes';
import {
  createSession,
  expectError,
  historyOf,
  HOUR,
  MINUTE,
  payableBody,
  shopper,
  sideApi,
  until,
  withFrozenClock,
} from '../helpers/checkout-payments';
import { keepHistory } from '../helpers/histories';
import { EXPECTED_FAILURE, startStack, Stack } from '../helpers/stack';
import { eventsAbout } from '../helpers/events';

/**
 * Refunds: `POST /v1/refunds` (Idempotency-Key, the captured ceiling under concurrency, nothing
 * captured, cash on delivery), the test gateway settling partial refunds with `refund.succeeded`
 * (and declining with `refund.failed`), the session's `refunded_amount` and payment status, and
 * `GET /v1/refunds`, `GET /v1/refunds/{id}`.
 */
let stack: Stack;
beforeAll(async () => {
  stack = await startStack();
});
afterAll(() => stack.stop());

type Merchant = Awaited<ReturnType<typeof buildMerchant>>;

const refund = (key: string, body: unknown, idempotencyKey: string | undefined = `idem_${randomString(16)}`) =>
  call(stack.baseUrl, 'POST', '/v1/refunds', { key, body, idempotencyKey });
const getRefund = (key: string, id: string) => call(stack.baseUrl, 'GET', `/v1/refunds/${id}`, { key });
const listRefunds = (key: string, query = '') => call(stack.baseUrl, 'GET', `/v1/refunds${query}`, { key });
const sessionRead = async (m: Merchant, id: string) =>
  (await call(stack.baseUrl, 'GET', `/v1/checkout/sessions/${id}`, { key: m.secretKey })).body;
const refundEvents = (refundId: string) => eventsAbout(stack.db, refundId);

/** A session paid on the test gateway (Succeed button), as the shopper would. */
async function paidSession(m: Merchant, over: Record<string, unknown> = {}) {
  const s = await createSession(stack, m.secretKey, payableBody({ amount: 10000, ...over }));
  const pub = shopper(stack, m.publishableKey);
  const attempt = await pub('POST', `/sessions/${s.code}/attempts`, { body: { method: 'test' } });
  await pub('POST', `/test-gateway/${attempt.body.attempt_id}/decide`, { body: { decision: 'succeeded' } });
  await until(async () => (await sessionRead(m, s.id)).payment_status === 'paid', 'the payment');
  return sessionRead(m, s.id);
}

/** Waits until the refund has settled at the vendor; returns it. */
async function settledRefund(m: Merchant, id: string) {
  let current: TestResponse | undefined;
  await until(async () => {
    current = await getRefund(m.secretKey, id);
    return current.body.status !== 'requested';
  }, `refund ${id} to settle`);
  return current!.body;
}

describe('POST /v1/refunds', () => {
  it('answers 201 with a requested refund (re_test_ id) against the captured payment', async () => {
    const m = await buildMerchant(stack.db);
    const s = await paidSession(m);
    stack.clock.freeze();
    try {
      const res = await refund(m.secretKey, {
        session_id: s.id,
        amount: 4000,
        reason: 'damaged',
        metadata: { rma: '7' },
      });
      expect(res.status).toBe(201);
      expect(res.headers.get('idempotent-replayed')).toBeNull();
      const now = stack.clock().toISOString();
      expect(res.body).toEqual({
        id: expect.stringMatching(/^re_test_[0-9a-z]{28}$/),
        object: 'refund',
        livemode: false,
        session_id: s.id,
        attempt_id: s.payment.attempt_id,
        amount: 4000,
        currency: 'IQD',
        reason: 'damaged',
        initiated_by: 'merchant',
        status: 'requested',
        gateway_reference: null,
        failure_reason: null,
        metadata: { rma: '7' },
        created_at: now,
        updated_at: now,
      });
    } finally {
      stack.clock.unfreeze();
    }
  });

  it('defaults reason to requested_by_customer and metadata to {}', async () => {
    const m = await buildMerchant(stack.db);
    const s = await paidSession(m);
    const res = await refund(m.secretKey, { session_id: s.id, amount: 1 });
    expect(res.body).toMatchObject({ reason: 'requested_by_customer', metadata: {} });
  });

  it('settles a partial refund on the test gateway: succeeded, one refund.succeeded, refunded_amount and partially_refunded', async () => {
    const m = await buildMerchant(stack.db);
    const s = await paidSession(m);
    const created = await refund(m.secretKey, { session_id: s.id, amount: 4000 });
    const settled = await settledRefund(m, created.body.id);
    expect(settled).toMatchObject({
      status: 'succeeded',
      gateway_reference: expect.stringMatching(/^tgr_/),
      failure_reason: null,
    });
    expect(await sessionRead(m, s.id)).toMatchObject({
      status: 'completed',
      payment_status: 'partially_refunded',
      refunded_amount: 4000,
    });
    const events = await refundEvents(created.body.id);
    expect(events.map((e) => e.type)).toEqual(['refund.succeeded']);
    expect(events[0].data_object).toEqual(settled);
    await keepHistory(stack, created.body.id, 'refund/succeeded');
  });

  it('moves the session to refunded once the refunds settled add up to what was captured', async () => {
    const m = await buildMerchant(stack.db);
    const s = await paidSession(m);
    await settledRefund(m, (await refund(m.secretKey, { session_id: s.id, amount: 2500 })).body.id);
    await settledRefund(m, (await refund(m.secretKey, { session_id: s.id, amount: 7500 })).body.id);
    expect(await sessionRead(m, s.id)).toMatchObject({ payment_status: 'refunded', refunded_amount: 10000 });
  });

  it('answers 409 refund_exceeds_captured, stating what remains, for more than remains captured', async () => {
    const m = await buildMerchant(stack.db);
    const s = await paidSession(m);
    await settledRefund(m, (await refund(m.secretKey, { session_id: s.id, amount: 6000 })).body.id);
    const res = await refund(m.secretKey, { session_id: s.id, amount: 4001 });
    expectError(res, 409, 'refund_exceeds_captured', [{ field: 'amount', issue: 'exceeds_captured' }]);
    expect(res.body.error.message).toBe('The refund exceeds what remains captured: 4000 IQD remains refundable.');
    expect((await refund(m.secretKey, { session_id: s.id, amount: 4000 })).status).toBe(201);
  });

  it('never lets concurrent refunds exceed what was captured', async () => {
    const m = await buildMerchant(stack.db);
    const s = await paidSession(m);
    const answers = await Promise.all(
      Array.from({ length: 10 }, () => refund(m.secretKey, { session_id: s.id, amount: 3000 })),
    );
    const created = answers.filter((r) => r.status === 201);
    expect(created).toHaveLength(3);
    for (const r of answers.filter((x) => x.status !== 201)) {
      expect({ status: r.status, code: r.body.error.code }).toEqual({ status: 409, code: 'refund_exceeds_captured' });
    }
    for (const r of created) await settledRefund(m, r.body.id);
    expect(await sessionRead(m, s.id)).toMatchObject({ refunded_amount: 9000, payment_status: 'partially_refunded' });
  });

  it('answers 409 session_not_open when nothing is captured (an open or an expired session)', async () => {
    const m = await buildMerchant(stack.db);
    const open = await createSession(stack, m.secretKey, payableBody());
    expectError(await refund(m.secretKey, { session_id: open.id, amount: 100 }), 409, 'session_not_open');
    await call(stack.baseUrl, 'POST', `/v1/checkout/sessions/${open.id}/expire`, { key: m.secretKey });
    expectError(await refund(m.secretKey, { session_id: open.id, amount: 100 }), 409, 'session_not_open');
  });

  it('answers 422 method_not_refundable for cash on delivery', async () => {
    const m = await buildMerchant(stack.db);
    const s = await createSession(stack, m.secretKey, payableBody());
    await shopper(stack, m.publishableKey)('POST', `/sessions/${s.code}/attempts`, {
      body: { method: 'cashondelivery' },
    });
    expectError(await refund(m.secretKey, { session_id: s.id, amount: 100 }), 422, 'method_not_refundable');
  });

  it("answers 404 session_not_found for another merchant's, the other mode's or an unknown session", async () => {
    const m = await buildMerchant(stack.db);
    const other = await buildMerchant(stack.db);
    const s = await paidSession(m);
    const live = await createCheckoutKey(stack.db, { merchantId: m.merchantId, mode: 'live', type: 'secret' });
    for (const [key, id] of [
      [other.secretKey, s.id],
      [live.key, s.id],
      [m.secretKey, 'cs_test_nosuch'],
      [m.secretKey, 'not an id!'],
    ]) {
      expectError(await refund(key, { session_id: id, amount: 100 }), 404, 'session_not_found');
    }
  });

  it('answers 400 idempotency_key_required without an Idempotency-Key', async () => {
    const m = await buildMerchant(stack.db);
    const s = await paidSession(m);
    expectError(await refund(m.secretKey, { session_id: s.id, amount: 100 }, ''), 400, 'idempotency_key_required', [
      { field: 'Idempotency-Key', issue: 'missing' },
    ]);
  });

  it('replays the first answer for the same key and body (Idempotent-Replayed: true), and refunds once', async () => {
    const m = await buildMerchant(stack.db);
    const s = await paidSession(m);
    const key = `idem_${randomString(16)}`;
    const first = await refund(m.secretKey, { session_id: s.id, amount: 500 }, key);
    const again = await refund(m.secretKey, { session_id: s.id, amount: 500 }, key);
    expect(again.status).toBe(201);
    expect(again.headers.get('idempotent-replayed')).toBe('true');
    expect(again.body).toEqual(first.body);
    expect((await listRefunds(m.secretKey, `?session_id=${s.id}`)).body.data).toHaveLength(1);
  });

  it('answers 409 idempotency_key_conflict for the same key with another body', async () => {
    const m = await buildMerchant(stack.db);
    const s = await paidSession(m);
    const key = `idem_${randomString(16)}`;
    await refund(m.secretKey, { session_id: s.id, amount: 500 }, key);
    expectError(await refund(m.secretKey, { session_id: s.id, amount: 600 }, key), 409, 'idempotency_key_conflict');
  });

  it('finds the refund of a key it already wrote when the create runs again (after a 5xx), instead of refunding twice', async () => {
    const m = await buildMerchant(stack.db);
    const s = await paidSession(m);
    const deps = {
      db: stack.db,
      clock: stack.clock,
      temporal: stack.env.client,
      taskQueue: stack.taskQueue,
      publicBaseUrl: stack.settings.PUBLIC_BASE_URL,
    };
    const scope = { merchantId: m.merchantId, mode: 'test' as const };
    const first = await createRefund(deps, scope, { session_id: s.id, amount: 700 }, 'idem_rerun_1');
    const second = await createRefund(deps, scope, { session_id: s.id, amount: 700 }, 'idem_rerun_1');
    expect(second.id).toBe(first.id);
    expect(await stack.db('refunds').where({ session_id: s.id })).toHaveLength(1);
  });

  it('converges concurrent creates with one key on one refund, which every answer names', async () => {
    const m = await buildMerchant(stack.db);
    const s = await paidSession(m);
    const key = `idem_${randomString(16)}`;
    const answers = await Promise.all(
      Array.from({ length: 5 }, () => refund(m.secretKey, { session_id: s.id, amount: 300 }, key)),
    );
    expect(answers.map((r) => r.status)).toEqual([201, 201, 201, 201, 201]);
    const rows = await stack.db('refunds').where({ session_id: s.id });
    expect(rows).toHaveLength(1);
    expect(answers.map((r) => r.body.id)).toEqual(Array(5).fill(rows[0].id));
  });

  it('treats a key as fresh after 24 hours: another body makes its own refund, only the same body finds the old one', async () => {
    const m = await buildMerchant(stack.db);
    const [a, b] = [await paidSession(m), await paidSession(m)];
    const key = `idem_${randomString(16)}`;
    const first = await refund(m.secretKey, { session_id: a.id, amount: 400 }, key);
    expect(first.status).toBe(201);
    await withFrozenClock(stack, new Date(stack.clock().getTime() + 24 * HOUR + MINUTE), async () => {
      const other = await refund(m.secretKey, { session_id: b.id, amount: 400 }, key);
      expect(other.status).toBe(201);
      expect(other.body).toMatchObject({ session_id: b.id, amount: 400 });
      expect(other.body.id).not.toBe(first.body.id);
      expect(await stack.db('refunds').where({ session_id: b.id })).toHaveLength(1);
    });
    await withFrozenClock(stack, new Date(stack.clock().getTime() + 48 * HOUR + MINUTE), async () => {
      const same = await refund(m.secretKey, { session_id: a.id, amount: 400 }, key);
      expect(same.status).toBe(201);
      expect(same.body.id).toBe(first.body.id);
      expect(await stack.db('refunds').where({ session_id: a.id })).toHaveLength(1);
    });
  });

  it('answers 400 validation_error for an amount that is not a positive integer, or unknown fields', async () => {
    const m = await buildMerchant(stack.db);
    const s = await paidSession(m);
    const invalid = (body: unknown) => refund(m.secretKey, body);
    expectError(await invalid({ session_id: s.id, amount: 0 }), 400, 'validation_error', [
      { field: 'amount', issue: 'Too small: expected number to be >=1' },
    ]);
    expectError(await invalid({ session_id: s.id, amount: 10.5 }), 400, 'validation_error', [
      { field: 'amount', issue: 'Invalid input: expected int, received number' },
    ]);
    expectError(await invalid({ session_id: s.id, amount: '100' }), 400, 'validation_error', [
      { field: 'amount', issue: 'Invalid input: expected number, received string' },
    ]);
    expectError(await invalid({ session_id: s.id, amount: 100, currency: 'IQD' }), 400, 'validation_error', [
      { field: 'currency', issue: 'Unrecognized key' },
    ]);
  });

  it('answers 403 insufficient_scope without refunds:write', async () => {
    const m = await buildMerchant(stack.db, { scopes: ['sessions:write', 'sessions:read', 'refunds:read'] });
    const res = await refund(m.secretKey, { session_id: 'cs_test_x', amount: 1 });
    expectError(res, 403, 'insufficient_scope');
    expect(res.body.error.message).toContain('refunds:write');
  });

  it('refunds in the captured currency: a session presented in USD refunds USD cents up to the captured amount', async () => {
    await setFxRate(stack.db, { from: 'IQD', to: 'USD', rate: '0.00068' }); // the rate the create tests use
    const m = await buildMerchant(stack.db);
    const s = await paidSession(m, { amount: 25000, presentment: { currency: 'USD' } });
    expect(s.payment).toMatchObject({ captured_amount: 1700, captured_currency: 'USD', fx_rate: 0.00068 });
    const over = await refund(m.secretKey, { session_id: s.id, amount: 1701 });
    expect(over.body.error.message).toBe('The refund exceeds what remains captured: 1700 USD remains refundable.');
    const res = await refund(m.secretKey, { session_id: s.id, amount: 1700 });
    expect(res.body).toMatchObject({ amount: 1700, currency: 'USD' });
    await settledRefund(m, res.body.id);
    expect(await sessionRead(m, s.id)).toMatchObject({ payment_status: 'refunded', refunded_amount: 1700 });
  });
});

describe('refund.failed', () => {
  it('fails a refund the test gateway declines (amount ending in 001): refund.failed, the session unchanged and the amount refundable again', async () => {
    const m = await buildMerchant(stack.db);
    const s = await paidSession(m);
    const created = await refund(m.secretKey, { session_id: s.id, amount: 1001 });
    const settled = await settledRefund(m, created.body.id);
    expect(settled).toMatchObject({ status: 'failed', failure_reason: 'simulated_decline', gateway_reference: null });
    expect((await refundEvents(created.body.id)).map((e) => [e.type, e.data_object.status])).toEqual([
      ['refund.failed', 'failed'],
    ]);
    expect(await sessionRead(m, s.id)).toMatchObject({ payment_status: 'paid', refunded_amount: 0 });
    expect((await refund(m.secretKey, { session_id: s.id, amount: 10000 })).status).toBe(201);
    await keepHistory(stack, created.body.id, 'refund/failed');
  });
});

describe('the vendor call', () => {
  it('carries the refund id as the idempotency key, so a retry after a lost answer refunds once, and is apart from the settling write', async () => {
    const calls: Array<{ idempotencyKey: string; amount: number }> = [];
    // The vendor refunds, then its answer is lost (a read timeout): the activity is retried.
    const vendor: Gateways = {
      ...defaultGateways,
      test: {
        ...testGateway,
        async refund(input) {
          calls.push({ idempotencyKey: input.idempotencyKey, amount: input.amount });
          const answer = await testGateway.refund(input);
          if (calls.length === 1) throw new Error(`read timeout ${EXPECTED_FAILURE}`);
          return answer;
        },
      },
    };
    const side = await sideApi(stack, { workerGateways: vendor });
    try {
      const m = await buildMerchant(stack.db, { name: 'Refund Books' });
      const s = await side.createSession(m.secretKey, payableBody({ amount: 10000 }));
      const sidePub = shopper(side, m.publishableKey);
      const attempt = await sidePub('POST', `/sessions/${s.code}/attempts`, { body: { method: 'test' } });
      await sidePub('POST', `/test-gateway/${attempt.body.attempt_id}/decide`, { body: { decision: 'succeeded' } });
      await until(async () => (await sessionRead(m, s.id)).payment_status === 'paid', 'the payment');

      const created = await call(side.baseUrl, 'POST', '/v1/refunds', {
        key: m.secretKey,
        body: { session_id: s.id, amount: 4000 },
        idempotencyKey: `idem_${randomString(16)}`,
      });
      expect(created.status).toBe(201);
      const settled = await settledRefund(m, created.body.id);
      expect(calls).toEqual([
        { idempotencyKey: created.body.id, amount: 4000 },
        { idempotencyKey: created.body.id, amount: 4000 },
      ]);
      // The vendor answered the retry with the first refund (same key, same reference): money moved once.
      const first = await testGateway.refund({
        idempotencyKey: created.body.id,
        attemptId: attempt.body.attempt_id,
        gatewayReference: null,
        amount: 4000,
        currency: 'IQD',
      });
      expect(settled).toMatchObject({
        status: 'succeeded',
        gateway_reference: (first as { gatewayReference: string }).gatewayReference,
      });
      expect((await refundEvents(created.body.id)).map((e) => e.type)).toEqual(['refund.succeeded']);
      expect(await sessionRead(m, s.id)).toMatchObject({ refunded_amount: 4000, payment_status: 'partially_refunded' });

      // Not through result(): awaiting it skips time, which this file's sessions do not follow.
      const handle = stack.env.client.workflow.getHandle(created.body.id);
      await until(async () => (await handle.describe()).status.name === 'COMPLETED', 'the refund workflow to end');
      expect((await historyOf(stack, created.body.id)).filter((l) => l.startsWith('activity'))).toEqual([
        'activity refundAtVendor',
        'activity recordRefundOutcome',
      ]);
      const d = await handle.describe();
      expect(d.typedSearchAttributes.get(merchantIdKey)).toBe(m.merchantId);
      expect(d.typedSearchAttributes.get(modeKey)).toBe('test');
      expect(await d.staticSummary()).toBe(`refund of 4000 IQD on ${s.id}, Refund Books (${m.merchantId}), test`);
      await keepHistory(stack, created.body.id, 'refund/vendor-retried-with-idempotency-key');
    } finally {
      await side.close();
    }
  });
});

describe('GET /v1/refunds and GET /v1/refunds/{id}', () => {
  it('reads a refund, and answers 404 refund_not_found for another merchant, the other mode or an unknown id', async () => {
    const m = await buildMerchant(stack.db);
    const other = await buildMerchant(stack.db);
    const live = await createCheckoutKey(stack.db, { merchantId: m.merchantId, mode: 'live', type: 'secret' });
    const s = await paidSession(m);
    const created = await refund(m.secretKey, { session_id: s.id, amount: 100 });
    const settled = await settledRefund(m, created.body.id);
    const res = await getRefund(m.secretKey, created.body.id);
    expect(res.status).toBe(200);
    expect(res.body).toEqual(settled);
    for (const [key, id] of [
      [other.secretKey, created.body.id],
      [live.key, created.body.id],
      [m.secretKey, 're_test_nosuch'],
    ]) {
      expectError(await getRefund(key, id), 404, 'refund_not_found');
    }
  });

  it('lists refunds newest first, by session_id, paged with next_cursor', async () => {
    const m = await buildMerchant(stack.db);
    const a = await paidSession(m);
    const b = await paidSession(m);
    const made: string[] = [];
    stack.clock.freeze();
    try {
      for (const [s, amount] of [
        [a, 100],
        [b, 200],
        [a, 300],
      ] as const) {
        made.push((await refund(m.secretKey, { session_id: s.id, amount })).body.id);
        stack.clock.advance(1000);
      }
    } finally {
      stack.clock.unfreeze();
    }
    const all = await listRefunds(m.secretKey);
    expect(all.body.data.map((r: { id: string }) => r.id)).toEqual([...made].reverse());
    expect(all.body.next_cursor).toBeNull();
    const ofA = await listRefunds(m.secretKey, `?session_id=${a.id}`);
    expect(ofA.body.data.map((r: { id: string }) => r.id)).toEqual([made[2], made[0]]);

    const page1 = await listRefunds(m.secretKey, '?limit=2');
    expect(page1.body.data.map((r: { id: string }) => r.id)).toEqual([made[2], made[1]]);
    const page2 = await listRefunds(m.secretKey, `?limit=2&cursor=${page1.body.next_cursor}`);
    expect(page2.body.data.map((r: { id: string }) => r.id)).toEqual([made[0]]);
    expect(page2.body.next_cursor).toBeNull();
  });

  it('answers 400 validation_error for a limit outside 1–100 or a cursor from another list', async () => {
    const m = await buildMerchant(stack.db);
    expectError(await listRefunds(m.secretKey, '?limit=0'), 400, 'validation_error', [
      { field: 'limit', issue: 'limit must be an integer from 1 to 100' },
    ]);
    for (let i = 0; i < 2; i++) await createSession(stack, m.secretKey, payableBody());
    const sessions = await call(stack.baseUrl, 'GET', '/v1/checkout/sessions?limit=1', { key: m.secretKey });
    const cursor = sessions.body.next_cursor;
    expect(cursor).toEqual(expect.any(String));
    expectError(await listRefunds(m.secretKey, `?cursor=${cursor}`), 400, 'validation_error', [
      { field: 'cursor', issue: 'invalid' },
    ]);
  });

  it('answers 403 insufficient_scope without refunds:read', async () => {
    const m = await buildMerchant(stack.db, { scopes: ['refunds:write'] });
    expectError(await listRefunds(m.secretKey), 403, 'insufficient_scope');
    expectError(await getRefund(m.secretKey, 're_test_x'), 403, 'insufficient_scope');
  });
});

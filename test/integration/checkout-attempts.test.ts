import { settleAttempt } from '../../src/checkout/attempts/transitions';
import { GatewayInitiationError, PaymentGateway, testGateway } from '../../src/checkout/gateways';
import { randomString } from '../../src/lib/ids';
import { createCheckoutKey } from '../../src/ops/checkout-keys';
import { buildMerchant } from '../helpers/factories';
import { call, TestResponse } from '../helpers/http';
import {
  createSession,
  expectError,
  MINUTE,
  payableBody,
  randomPhone,
  sessionBody,
  sessionEvents,
  shopper,
  sideApi,
  smsCode,
  until,
  withFrozenClock,
} from '../helpers/checkout-payments';
import { keepHistory } from '../helpers/histories';
import { startStack, Stack } from '../helpers/stack';
import { decisionUpdateFallbacks } from '../../src/telemetry/checkout';

/**
 * Paying a session over HTTP: `POST …/attempts` and its refusals, the test gateway's buttons and
 * data read, cash on delivery, the two attempt polls and their `redirect_to` rules, and what each
 * outcome does to the session and its events.
 */
let stack: Stack;
beforeAll(async () => {
  stack = await startStack();
});
afterAll(() => stack.stop());

async function merchantWith(opts: Parameters<typeof buildMerchant>[1] = {}) {
  const name = `Shop ${randomString(6)}`;
  const m = await buildMerchant(stack.db, { name, ...opts });
  return { ...m, name, pub: shopper(stack, m.publishableKey) };
}
type M = Awaited<ReturnType<typeof merchantWith>>;

const startAttempt = (m: M, code: string, method = 'test', token?: string) =>
  m.pub('POST', `/sessions/${code}/attempts`, { body: { method }, token });
const decide = (m: M, attemptId: string, decision: string) =>
  m.pub('POST', `/test-gateway/${attemptId}/decide`, { body: { decision } });
const poll = (m: M, code: string, attemptId: string) => m.pub('GET', `/sessions/${code}/attempts/${attemptId}`);
const merchantRead = async (m: M, id: string) =>
  (await call(stack.baseUrl, 'GET', `/v1/checkout/sessions/${id}`, { key: m.secretKey })).body;
const attemptRow = (id: string) => stack.db('payment_attempts').where({ id }).first();

/** Waits (reading Postgres, so no poll verifies anything) until the attempt is no longer pending. */
async function settled(attemptId: string) {
  await until(async () => (await attemptRow(attemptId)).status !== 'pending', `attempt ${attemptId} to settle`);
  return attemptRow(attemptId);
}

/** A payable session and a started test attempt on it. */
async function pendingAttempt(m: M, over: Record<string, unknown> = {}) {
  const s = await createSession(stack, m.secretKey, payableBody(over));
  const res = await startAttempt(m, s.code);
  expect(res.status).toBe(201);
  return { s, attempt: res.body };
}

describe('POST /v1/public/sessions/{code}/attempts', () => {
  it('starts a test-gateway attempt: 201, a pa_test_ id, redirect to {hosted}/t/<attempt_id>, session processing', async () => {
    const m = await merchantWith();
    const s = await createSession(stack, m.secretKey, payableBody());
    const res = await startAttempt(m, s.code);
    expect(res.status).toBe(201);
    expect(res.body).toEqual({
      attempt_id: expect.stringMatching(/^pa_test_[0-9a-z]{28}$/),
      kind: 'redirect',
      redirect_url: `${stack.settings.PUBLIC_BASE_URL}/t/${res.body.attempt_id}`,
      status: 'pending',
      session_status: 'processing',
      payment_status: 'unpaid',
    });
    expect(await attemptRow(res.body.attempt_id)).toMatchObject({
      session_id: s.id,
      method: 'test',
      gateway: 'test',
      status: 'pending',
      presented_amount: 25000,
      presented_currency: 'IQD',
      gateway_reference: expect.stringMatching(/^tgw_/),
    });
  });

  it('shows the session as processing on the merchant and public reads while the attempt is pending', async () => {
    const m = await merchantWith();
    const { s } = await pendingAttempt(m);
    expect(await merchantRead(m, s.id)).toMatchObject({
      status: 'processing',
      payment_status: 'unpaid',
      payment: null,
    });
    expect((await m.pub('GET', `/sessions/${s.code}`)).body).toMatchObject({ status: 'processing' });
  });

  it('answers 409 attempt_in_progress while an attempt is with the vendor', async () => {
    const m = await merchantWith();
    const { s } = await pendingAttempt(m);
    expectError(await startAttempt(m, s.code), 409, 'attempt_in_progress');
    expectError(await startAttempt(m, s.code, 'cashondelivery'), 409, 'attempt_in_progress');
  });

  it('lets exactly one of concurrent attempts start', async () => {
    const m = await merchantWith();
    const s = await createSession(stack, m.secretKey, payableBody());
    const answers = await Promise.all(Array.from({ length: 6 }, () => startAttempt(m, s.code)));
    expect(answers.filter((r) => r.status === 201)).toHaveLength(1);
    for (const r of answers.filter((x) => x.status !== 201)) expectError(r, 409, 'attempt_in_progress');
    expect(await stack.db('payment_attempts').where({ session_id: s.id })).toHaveLength(1);
  });

  it('answers 422 method_not_available for a method the session does not offer', async () => {
    const m = await merchantWith();
    const s = await createSession(stack, m.secretKey, payableBody({ payment_method_types: ['test'] }));
    expectError(await startAttempt(m, s.code, 'cashondelivery'), 422, 'method_not_available', [
      { field: 'method', issue: 'not_offered' },
    ]);
    expectError(await startAttempt(m, s.code, 'bitcoin'), 422, 'method_not_available', [
      { field: 'method', issue: 'not_offered' },
    ]);
  });

  it('answers 422 method_not_available for card and wallets (vendor_not_configured)', async () => {
    const m = await merchantWith({ methods: ['test', 'card', 'zaincash'] });
    const s = await createSession(
      stack,
      m.secretKey,
      payableBody({ payment_method_types: ['card', 'zaincash', 'test'] }),
    );
    for (const method of ['card', 'zaincash']) {
      expectError(await startAttempt(m, s.code, method), 422, 'method_not_available', [
        { field: 'method', issue: 'vendor_not_configured' },
      ]);
    }
    expect((await merchantRead(m, s.id)).status).toBe('open');
  });

  it('answers 422 method_not_available for a method whose limits the amount is outside (amount_out_of_range)', async () => {
    const m = await merchantWith();
    const s = await createSession(stack, m.secretKey, payableBody({ amount: 5_000_001 }));
    expectError(await startAttempt(m, s.code, 'cashondelivery'), 422, 'method_not_available', [
      { field: 'method', issue: 'amount_out_of_range' },
    ]);
  });

  it('answers 403 phone_not_verified when the session requires a verified phone, and starts with a valid token', async () => {
    const m = await merchantWith();
    const s = await createSession(stack, m.secretKey, sessionBody({ customer: { name: 'Layla' } }));
    expectError(await startAttempt(m, s.code), 403, 'phone_not_verified');
    const phone = randomPhone();
    await m.pub('POST', `/sessions/${s.code}/otp`, { body: { phone } });
    const verified = await m.pub('POST', `/sessions/${s.code}/otp/verify`, {
      body: { phone, code: await smsCode(stack.db, phone) },
    });
    expectError(await startAttempt(m, s.code, 'test', `${verified.body.customer_token}0`), 403, 'phone_not_verified');
    expect((await startAttempt(m, s.code, 'test', verified.body.customer_token)).status).toBe(201);
  });

  it('answers 400 validation_error naming the required shopper details the session does not have yet', async () => {
    const m = await merchantWith();
    const s = await createSession(
      stack,
      m.secretKey,
      sessionBody({ collect: { phone: 'none', name: 'required', shipping_address: 'required' } }),
    );
    expectError(await startAttempt(m, s.code), 400, 'validation_error', [
      { field: 'customer.name', issue: 'required' },
      { field: 'customer.address', issue: 'required' },
    ]);
  });

  it('answers 400 validation_error for a body without method or with unknown fields', async () => {
    const m = await merchantWith();
    const s = await createSession(stack, m.secretKey, payableBody());
    expectError(
      await m.pub('POST', `/sessions/${s.code}/attempts`, { body: { method: 'test', card: '4242' } }),
      400,
      'validation_error',
      [{ field: 'card', issue: 'Unrecognized key' }],
    );
    expectError(await m.pub('POST', `/sessions/${s.code}/attempts`, { body: {} }), 400, 'validation_error', [
      { field: 'method', issue: 'Invalid input: expected string, received undefined' },
    ]);
  });

  it('answers 409 session_not_open for a completed or expired session, and 404 for an unknown code', async () => {
    const m = await merchantWith();
    const done = await createSession(stack, m.secretKey, payableBody());
    expect((await startAttempt(m, done.code, 'cashondelivery')).status).toBe(201);
    expectError(await startAttempt(m, done.code), 409, 'session_not_open');
    const expired = await createSession(stack, m.secretKey, payableBody());
    await call(stack.baseUrl, 'POST', `/v1/checkout/sessions/${expired.id}/expire`, { key: m.secretKey });
    expectError(await startAttempt(m, expired.code), 409, 'session_not_open');
    expectError(await startAttempt(m, 'NOSUCHCODE12'), 404, 'session_not_found');
  });

  it('answers 409 session_not_open once expires_at has passed, even before the timer fired', async () => {
    const m = await merchantWith();
    const s = await createSession(stack, m.secretKey, payableBody());
    stack.clock.advance(60 * MINUTE);
    try {
      expectError(await startAttempt(m, s.code), 409, 'session_not_open');
    } finally {
      stack.clock.advance(-60 * MINUTE);
    }
  });

  it('answers 429 rate_limited with Retry-After after 10 attempts per session in 10 minutes', async () => {
    const m = await merchantWith();
    const window = 10 * MINUTE;
    await withFrozenClock(stack, new Date((Math.floor(Date.now() / window) + 1) * window), async () => {
      const s = await createSession(stack, m.secretKey, payableBody());
      for (let i = 0; i < 10; i++) {
        const res = await startAttempt(m, s.code);
        expect(res.status).toBe(201);
        expect((await decide(m, res.body.attempt_id, 'failed')).status).toBe(200);
        await settled(res.body.attempt_id);
      }
      const over = await startAttempt(m, s.code);
      expectError(over, 429, 'rate_limited');
      expect(over.headers.get('retry-after')).toBe('600');
      stack.clock.advance(window);
      expect((await startAttempt(m, s.code)).status).toBe(201);
    });
  });

  it('names live attempts pa_ and test attempts pa_test_', async () => {
    const m = await merchantWith();
    const liveSecret = await createCheckoutKey(stack.db, { merchantId: m.merchantId, mode: 'live', type: 'secret' });
    const livePub = await createCheckoutKey(stack.db, { merchantId: m.merchantId, mode: 'live', type: 'publishable' });
    const s = await createSession(stack, liveSecret.key, payableBody({ payment_method_types: ['cashondelivery'] }));
    const res = await shopper(stack, livePub.key)('POST', `/sessions/${s.code}/attempts`, {
      body: { method: 'cashondelivery' },
    });
    expect(res.body.attempt_id).toMatch(/^pa_[0-9a-z]{28}$/);
  });
});

describe('vendor failures', () => {
  it('answers 502 gateway_error when the vendor cannot start the payment: attempt failed, session open again, one payment.attempt.failed', async () => {
    let refuse = true;
    const flaky: PaymentGateway = {
      ...testGateway,
      async initiate(attempt, base) {
        if (refuse) throw new GatewayInitiationError('vendor said no');
        return testGateway.initiate(attempt, base);
      },
    };
    const side = await sideApi(stack, { adapters: { gateways: { test: flaky } } });
    try {
      const m = await merchantWith();
      const pub = shopper(side, m.publishableKey);
      const s = await side.createSession(m.secretKey, payableBody());
      const res = await pub('POST', `/sessions/${s.code}/attempts`, { body: { method: 'test' } });
      expectError(res, 502, 'gateway_error');
      const [attempt] = await stack.db('payment_attempts').where({ session_id: s.id });
      expect(attempt).toMatchObject({ status: 'failed', failure_reason: 'gateway_error' });
      expect(await merchantRead(m, s.id)).toMatchObject({ status: 'open', payment_status: 'unpaid' });
      const failed = await sessionEvents(stack.db, s.id, 'payment.attempt.failed');
      expect(failed).toHaveLength(1);
      expect(failed[0].data_object.failed_attempt).toEqual({
        attempt_id: attempt.id,
        method: 'test',
        gateway: 'test',
        status: 'failed',
        reason: 'gateway_error',
      });

      refuse = false;
      const again = await pub('POST', `/sessions/${s.code}/attempts`, { body: { method: 'test' } });
      expect(again.status).toBe(201);
      await pub('POST', `/test-gateway/${again.body.attempt_id}/decide`, { body: { decision: 'succeeded' } });
      expect((await settled(again.body.attempt_id)).status).toBe('succeeded');
      expect((await merchantRead(m, s.id)).status).toBe('completed');
      await keepHistory(stack, s.id, 'session/initiation-failed-then-paid');
    } finally {
      await side.close();
    }
  });

  it('answers 503 gateway_not_configured when the vendor has no credentials for the mode, and starts nothing', async () => {
    const unconfigured: PaymentGateway = { ...testGateway, configured: () => false };
    const side = await sideApi(stack, { adapters: { gateways: { test: unconfigured } } });
    try {
      const m = await merchantWith();
      const s = await side.createSession(m.secretKey, payableBody());
      const res = await shopper(side, m.publishableKey)('POST', `/sessions/${s.code}/attempts`, {
        body: { method: 'test' },
      });
      expectError(res, 503, 'gateway_not_configured');
      expect(await stack.db('payment_attempts').where({ session_id: s.id })).toHaveLength(0);
      expect((await merchantRead(m, s.id)).status).toBe('open');
    } finally {
      await side.close();
    }
  });
});

describe('the test gateway buttons', () => {
  it('Succeed completes the session paid, with the payment object and one checkout.session.completed', async () => {
    const m = await merchantWith();
    const { s, attempt } = await pendingAttempt(m);
    const res = await decide(m, attempt.attempt_id, 'succeeded');
    expect(res.status).toBe(200);
    // The workflow's Update settled it within the call: the answer has the outcome.
    expect(res.body).toEqual({
      attempt_id: attempt.attempt_id,
      status: 'succeeded',
      return_url: `${stack.settings.PUBLIC_BASE_URL}/r/${attempt.attempt_id}`,
    });
    const row = await settled(attempt.attempt_id);
    expect(row).toMatchObject({ status: 'succeeded', captured_amount: 25000, captured_currency: 'IQD' });
    const session = await merchantRead(m, s.id);
    expect(session).toMatchObject({ status: 'completed', payment_status: 'paid', completed_at: expect.any(String) });
    expect(session.payment).toEqual({
      attempt_id: attempt.attempt_id,
      method: 'test',
      gateway: 'test',
      gateway_reference: row.gateway_reference,
      captured_amount: 25000,
      captured_currency: 'IQD',
      presented_amount: 25000,
      presented_currency: 'IQD',
      fx_rate: null,
      captured_at: new Date(row.captured_at).toISOString(),
      instrument: null,
    });
    const completed = await sessionEvents(stack.db, s.id, 'checkout.session.completed');
    expect(completed).toHaveLength(1);
    expect(completed[0].data_object).toEqual(session);
    await keepHistory(stack, s.id, 'session/button-succeed');
  });

  it('Fail declines the attempt (simulated_decline): session open again, one payment.attempt.failed with failed_attempt', async () => {
    const m = await merchantWith();
    const { s, attempt } = await pendingAttempt(m);
    await decide(m, attempt.attempt_id, 'failed');
    expect(await settled(attempt.attempt_id)).toMatchObject({ status: 'failed', failure_reason: 'simulated_decline' });
    const session = await merchantRead(m, s.id);
    expect(session).toMatchObject({ status: 'open', payment_status: 'unpaid', payment: null });
    const failed = await sessionEvents(stack.db, s.id, 'payment.attempt.failed');
    expect(failed).toHaveLength(1);
    expect(failed[0].data_object).toEqual({
      ...session,
      failed_attempt: {
        attempt_id: attempt.attempt_id,
        method: 'test',
        gateway: 'test',
        status: 'failed',
        reason: 'simulated_decline',
      },
    });
    await keepHistory(stack, s.id, 'session/button-fail');
  });

  it('Cancel cancels the attempt at the vendor (canceled_by_shopper): session open again, one payment.attempt.failed', async () => {
    const m = await merchantWith();
    const { s, attempt } = await pendingAttempt(m);
    await decide(m, attempt.attempt_id, 'canceled');
    expect(await settled(attempt.attempt_id)).toMatchObject({
      status: 'canceled',
      failure_reason: 'canceled_by_shopper',
    });
    expect((await merchantRead(m, s.id)).status).toBe('open');
    const failed = await sessionEvents(stack.db, s.id, 'payment.attempt.failed');
    expect(failed.map((e) => e.data_object.failed_attempt.status)).toEqual(['canceled']);
    await keepHistory(stack, s.id, 'session/button-cancel');
  });

  it('lets the shopper pay again after a failed attempt', async () => {
    const m = await merchantWith();
    const { s, attempt } = await pendingAttempt(m);
    await decide(m, attempt.attempt_id, 'failed');
    await settled(attempt.attempt_id);
    const second = await startAttempt(m, s.code);
    expect(second.status).toBe(201);
    await decide(m, second.body.attempt_id, 'succeeded');
    await settled(second.body.attempt_id);
    expect(await merchantRead(m, s.id)).toMatchObject({ status: 'completed', payment_status: 'paid' });
    expect((await merchantRead(m, s.id)).payment.attempt_id).toBe(second.body.attempt_id);
  });

  it('when neither the Update nor the signal reaches a workflow, answers 503 with Retry-After and takes the decision back', async () => {
    const m = await merchantWith();
    const { s, attempt } = await pendingAttempt(m);
    await stack.env.client.workflow.getHandle(s.id).terminate('the test ends it');
    const fallbacks = async () => (await decisionUpdateFallbacks.get()).values[0]?.value ?? 0;
    const before = await fallbacks();
    const res = await decide(m, attempt.attempt_id, 'succeeded');
    expectError(res, 503, 'service_unavailable');
    expect(await fallbacks()).toBe(before + 1);
    expect(res.headers.get('retry-after')).toBe('5');
    // Nothing recorded: the shopper can press again.
    expect(await attemptRow(attempt.attempt_id)).toMatchObject({ status: 'pending', decision: null });
  });

  it('answers pending to the slow button at once (its outcome comes later)', async () => {
    const m = await merchantWith();
    const { attempt } = await pendingAttempt(m);
    const res = await decide(m, attempt.attempt_id, 'slow');
    expect(res.status).toBe(200);
    expect(res.body.status).toBe('pending');
    expect((await attemptRow(attempt.attempt_id)).status).toBe('pending');
  });

  it('answers 409 attempt_already_decided to a second button, and keeps the first', async () => {
    const m = await merchantWith();
    const { attempt } = await pendingAttempt(m);
    await decide(m, attempt.attempt_id, 'canceled');
    expectError(await decide(m, attempt.attempt_id, 'succeeded'), 409, 'attempt_already_decided');
    expect((await settled(attempt.attempt_id)).status).toBe('canceled');
    expectError(await decide(m, attempt.attempt_id, 'succeeded'), 409, 'attempt_already_decided');
  });

  it('answers 403 forbidden for an attempt that is not a test-gateway attempt (cash on delivery)', async () => {
    const m = await merchantWith();
    const s = await createSession(stack, m.secretKey, payableBody());
    const cod = await startAttempt(m, s.code, 'cashondelivery');
    expectError(await decide(m, cod.body.attempt_id, 'succeeded'), 403, 'forbidden');
    expectError(await m.pub('GET', `/test-gateway/${cod.body.attempt_id}`), 403, 'forbidden');
  });

  it("answers 404 attempt_not_found for another merchant's attempt", async () => {
    const m = await merchantWith();
    const other = await merchantWith();
    const { attempt } = await pendingAttempt(m);
    expectError(await decide(other, attempt.attempt_id, 'succeeded'), 404, 'attempt_not_found');
    expectError(await other.pub('GET', `/test-gateway/${attempt.attempt_id}`), 404, 'attempt_not_found');
  });

  it('answers 400 validation_error for a decision that is not one of the four buttons', async () => {
    const m = await merchantWith();
    const { attempt } = await pendingAttempt(m);
    expectError(await decide(m, attempt.attempt_id, 'refund'), 400, 'validation_error', [
      { field: 'decision', issue: 'Invalid option: expected one of "succeeded"|"failed"|"canceled"|"slow"' },
    ]);
  });

  it('reads the simulated vendor page data: GET /v1/public/test-gateway/{attempt_id}', async () => {
    const m = await merchantWith();
    const { attempt } = await pendingAttempt(m, { amount: 17500 });
    const res = await m.pub('GET', `/test-gateway/${attempt.attempt_id}`);
    expect(res.status).toBe(200);
    expect(res.body).toEqual({
      attempt_id: attempt.attempt_id,
      status: 'pending',
      amount: 17500,
      currency: 'IQD',
      merchant: { display_name: m.name },
      livemode: false,
      return_url: `${stack.settings.PUBLIC_BASE_URL}/r/${attempt.attempt_id}`,
    });
  });
});

describe('the amount rule when the shopper returns without a button', () => {
  it('declines an amount ending in 001 at once (simulated_decline), on the first poll', async () => {
    const m = await merchantWith();
    const { s, attempt } = await pendingAttempt(m, { amount: 25001 });
    expect((await poll(m, s.code, attempt.attempt_id)).body.status).toBe('pending');
    expect(await settled(attempt.attempt_id)).toMatchObject({ status: 'failed', failure_reason: 'simulated_decline' });
    expect(await sessionEvents(stack.db, s.id, 'payment.attempt.failed')).toHaveLength(1);
    await keepHistory(stack, s.id, 'session/return-without-button-001-declined');
  });

  it('succeeds for any other ending, on the first poll', async () => {
    const m = await merchantWith();
    const { s, attempt } = await pendingAttempt(m, { amount: 25004 });
    await poll(m, s.code, attempt.attempt_id);
    expect((await settled(attempt.attempt_id)).status).toBe('succeeded');
    expect((await merchantRead(m, s.id)).payment_status).toBe('paid');
    await keepHistory(stack, s.id, 'session/return-without-button-succeeds');
  });

  it('asks the workflow to verify once, however many polls come', async () => {
    const m = await merchantWith();
    const { s, attempt } = await pendingAttempt(m, { amount: 25002 });
    await Promise.all(Array.from({ length: 5 }, () => poll(m, s.code, attempt.attempt_id)));
    await until(async () => (await attemptRow(attempt.attempt_id)).verify_requested_at !== null, 'the verify');
    // The poll marks the attempt, then signals: wait for the signal, then make sure no second one came.
    const verifies = async () =>
      ((await stack.env.client.workflow.getHandle(s.id).fetchHistory()).events ?? []).filter(
        (e) => e.workflowExecutionSignaledEventAttributes?.signalName === 'attemptVerify',
      );
    await until(async () => (await verifies()).length > 0, 'the verify signal');
    await new Promise((r) => setTimeout(r, 300));
    expect(await verifies()).toHaveLength(1);
  });
});

describe('cash on delivery', () => {
  it('completes the session at once with requires_offline_collection, captured_amount null and one checkout.session.completed', async () => {
    const m = await merchantWith();
    const s = await createSession(stack, m.secretKey, payableBody());
    const res = await startAttempt(m, s.code, 'cashondelivery');
    expect(res.status).toBe(201);
    expect(res.body).toEqual({
      attempt_id: expect.stringMatching(/^pa_test_/),
      kind: 'offline',
      status: 'succeeded',
      session_status: 'completed',
      payment_status: 'requires_offline_collection',
    });
    const session = await merchantRead(m, s.id);
    expect(session).toMatchObject({ status: 'completed', payment_status: 'requires_offline_collection' });
    expect(session.payment).toEqual({
      attempt_id: res.body.attempt_id,
      method: 'cashondelivery',
      gateway: 'offline',
      gateway_reference: null,
      captured_amount: null,
      captured_currency: null,
      presented_amount: 25000,
      presented_currency: 'IQD',
      fx_rate: null,
      captured_at: null,
      instrument: null,
    });
    const completed = await sessionEvents(stack.db, s.id, 'checkout.session.completed');
    expect(completed.map((e) => e.data_object)).toEqual([session]);
    await until(
      async () => (await stack.env.client.workflow.getHandle(s.id).describe()).status.name === 'COMPLETED',
      'the workflow to end',
    );
    await keepHistory(stack, s.id, 'session/cash-on-delivery');
  });
});

describe('attempt polls', () => {
  const pollFields = (res: TestResponse) => Object.keys(res.body).sort();

  it('GET …/attempts/{attempt_id} answers exactly the poll fields while pending', async () => {
    const m = await merchantWith();
    const { s, attempt } = await pendingAttempt(m, { amount: 25002 });
    const res = await poll(m, s.code, attempt.attempt_id);
    expect(res.status).toBe(200);
    expect(res.body).toEqual({
      attempt_id: attempt.attempt_id,
      code: s.code,
      method: 'test',
      status: 'pending',
      session_status: 'processing',
      payment_status: 'unpaid',
      redirect_to: null,
      failure_reason: null,
      present: { amount: 25002, currency: 'IQD' },
      cancel_url: 'https://shop.example.com/cart',
    });
  });

  it('after success, redirect_to is the success_url with session_id and reference_id appended, never a status', async () => {
    const m = await merchantWith();
    const { s, attempt } = await pendingAttempt(m);
    await decide(m, attempt.attempt_id, 'succeeded');
    await settled(attempt.attempt_id);
    const res = await poll(m, s.code, attempt.attempt_id);
    expect(res.body).toMatchObject({
      status: 'succeeded',
      session_status: 'completed',
      payment_status: 'paid',
      failure_reason: null,
      cancel_url: 'https://shop.example.com/cart',
    });
    const expected = new URL('https://shop.example.com/done?order=7');
    expected.searchParams.append('session_id', s.id);
    expected.searchParams.append('reference_id', s.reference_id);
    expect(res.body.redirect_to).toBe(expected.toString());
    expect(res.body.redirect_to).not.toMatch(/status|paid|succeeded/);
  });

  it('while failed: session_status open, redirect_to null, failure_reason set', async () => {
    const m = await merchantWith();
    const { s, attempt } = await pendingAttempt(m);
    await decide(m, attempt.attempt_id, 'failed');
    await settled(attempt.attempt_id);
    expect((await poll(m, s.code, attempt.attempt_id)).body).toMatchObject({
      status: 'failed',
      session_status: 'open',
      payment_status: 'unpaid',
      redirect_to: null,
      failure_reason: 'simulated_decline',
    });
  });

  it('redirects a cash-on-delivery attempt to the success_url too', async () => {
    const m = await merchantWith();
    const s = await createSession(stack, m.secretKey, payableBody());
    const cod = await startAttempt(m, s.code, 'cashondelivery');
    const res = await poll(m, s.code, cod.body.attempt_id);
    expect(res.body).toMatchObject({ status: 'succeeded', payment_status: 'requires_offline_collection' });
    expect(res.body.redirect_to).toContain(`session_id=${s.id}`);
  });

  it('GET /v1/public/attempts/{attempt_id} answers the same poll plus merchant, locale and livemode, without the code', async () => {
    const m = await merchantWith();
    const { s, attempt } = await pendingAttempt(m, { amount: 25002, locale: 'ku' });
    const withCode = await poll(m, s.code, attempt.attempt_id);
    const res = await m.pub('GET', `/attempts/${attempt.attempt_id}`);
    expect(res.status).toBe(200);
    expect(res.body).toEqual({
      ...withCode.body,
      merchant: { display_name: m.name, logo_url: null, accent: null },
      locale: 'ku',
      livemode: false,
    });
    expect(pollFields(res)).toEqual([...pollFields(withCode), 'livemode', 'locale', 'merchant'].sort());
  });

  it("answers 404 attempt_not_found for another session's, another merchant's or an unknown attempt", async () => {
    const m = await merchantWith();
    const other = await merchantWith();
    const { attempt } = await pendingAttempt(m);
    const elsewhere = await createSession(stack, m.secretKey, payableBody());
    expectError(await poll(m, elsewhere.code, attempt.attempt_id), 404, 'attempt_not_found');
    expectError(await other.pub('GET', `/attempts/${attempt.attempt_id}`), 404, 'attempt_not_found');
    expectError(await m.pub('GET', '/attempts/pa_test_nosuch'), 404, 'attempt_not_found');
  });
});

describe('captured amount', () => {
  it('marks an attempt paid only if the captured amount equals the presented amount', async () => {
    const m = await merchantWith();
    const { s, attempt } = await pendingAttempt(m, { amount: 25002 });
    const result = await settleAttempt(stack.db, {
      attemptId: attempt.attempt_id,
      outcome: 'succeeded',
      capturedAmount: 25001,
      expireIfDue: false,
      now: stack.clock(),
      publicBaseUrl: stack.settings.PUBLIC_BASE_URL,
    });
    expect(result?.attempt).toMatchObject({
      status: 'failed',
      failure_reason: 'amount_mismatch',
      captured_amount: null,
    });
    expect(await merchantRead(m, s.id)).toMatchObject({ status: 'open', payment_status: 'unpaid', payment: null });
    expect(await sessionEvents(stack.db, s.id, 'checkout.session.completed')).toHaveLength(0);
    expect(await sessionEvents(stack.db, s.id, 'payment.attempt.failed')).toHaveLength(1);
  });
});

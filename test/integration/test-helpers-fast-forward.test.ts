import { randomString } from '../../src/lib/ids';

const SECONDS_ISSUE = 'seconds must be a whole number from 1 to 2592000 (30 days)';
import { attemptSchedule } from '../../src/temporal/session';
import { DISABLE_AFTER_FAILING_MS, retryDelaysMs } from '../../src/webhooks/schedule';
import {
  createSession,
  expectError,
  historyOf as workflowHistory,
  HOUR,
  payableBody,
  SECOND,
  sessionEvents,
  shopper,
  until,
  untilHistoryEndsWith,
} from '../helpers/checkout-payments';
import { buildMerchant } from '../helpers/factories';
import { keepHistory } from '../helpers/histories';
import { call } from '../helpers/http';
import { HttpsReceiver, RECEIVER_HOST, startHttpsReceiver } from '../helpers/https-receiver';
import { startStack, Stack } from '../helpers/stack';
import { webhookSteps } from '../helpers/webhooks';

/**
 * Test mode's fast-forward (`POST /v1/test_helpers/…/fast_forward`): a session's `expires_at` and
 * its pending attempt's clocks, and a webhook endpoint's pending retries and 3-day failure clock,
 * move N seconds earlier, and the workflows act on the moved times in real seconds, with the same
 * events and e-mail as when the time passes. Nothing here skips Temporal time: the workflows'
 * timers must re-arm from the moved deadlines on their own.
 */
let stack: Stack;
let receiver: HttpsReceiver;
beforeAll(async () => {
  receiver = await startHttpsReceiver();
  receiver.respond = () => ({ status: 503 });
  stack = await startStack({ WEBHOOK_ALLOWED_HOSTS: RECEIVER_HOST, WEBHOOK_EXTRA_CA_PATH: receiver.caPath });
});
afterAll(async () => {
  await stack.stop();
  await receiver.close();
});

type Merchant = Awaited<ReturnType<typeof buildMerchant>>;

const fastForwardSession = (key: string, id: string, body: unknown) =>
  call(stack.baseUrl, 'POST', `/v1/test_helpers/checkout/sessions/${id}/fast_forward`, { key, body });
const fastForwardEndpoint = (key: string, id: string, body: unknown) =>
  call(stack.baseUrl, 'POST', `/v1/test_helpers/webhook_endpoints/${id}/fast_forward`, { key, body });
const sessionRead = async (m: Merchant, id: string) =>
  (await call(stack.baseUrl, 'GET', `/v1/checkout/sessions/${id}`, { key: m.secretKey })).body;
const attemptRow = (id: string) => stack.db('payment_attempts').where({ id }).first();

/** A session expiring `ttl` from now on the app clock. */
const sessionExpiringIn = (m: Merchant, ttl: number, over: Record<string, unknown> = {}) =>
  createSession(
    stack,
    m.secretKey,
    payableBody({ expires_at: new Date(stack.clock().getTime() + ttl).toISOString(), ...over }),
  );

/** A session (2 hours to go) whose test attempt is pending; the workflow has taken it. */
async function pendingAttempt(m: Merchant, amount: number) {
  const s = await sessionExpiringIn(m, 2 * HOUR, { amount });
  const pub = shopper(stack, m.publishableKey);
  const res = await pub('POST', `/sessions/${s.code}/attempts`, { body: { method: 'test' } });
  expect(res.status).toBe(201);
  const attemptId = res.body.attempt_id as string;
  await until(async () => (await historyOf(s.id)).includes('signal attemptStarted'), 'the hand-over');
  return { s, attemptId, pub };
}

const historyOf = (id: string) => workflowHistory(stack, id);

describe('POST /v1/test_helpers/checkout/sessions/{id}/fast_forward', () => {
  it('moves expires_at exactly N seconds earlier; the session expires within seconds with its event', async () => {
    const m = await buildMerchant(stack.db);
    const s = await sessionExpiringIn(m, 2 * HOUR);
    const res = await fastForwardSession(m.secretKey, s.id, { seconds: 3600 });
    expect(res.status).toBe(200);
    expect(res.body).toMatchObject({ id: s.id, status: 'open' });
    expect(Date.parse(res.body.expires_at)).toBe(Date.parse(s.expires_at) - 3600 * SECOND);
    expect(await sessionEvents(stack.db, s.id, 'checkout.session.expired')).toHaveLength(0);

    // An hour still to go: nothing happens until the rest is fast-forwarded too.
    await new Promise((r) => setTimeout(r, 500));
    expect((await sessionRead(m, s.id)).status).toBe('open');
    const started = Date.now();
    expect((await fastForwardSession(m.secretKey, s.id, { seconds: 3600 })).status).toBe(200);
    await until(async () => (await sessionRead(m, s.id)).status === 'expired', 'the expiry');
    expect(Date.now() - started).toBeLessThan(5 * SECOND);
    expect(await sessionEvents(stack.db, s.id, 'checkout.session.expired')).toHaveLength(1);
    expect(await stack.env.client.workflow.getHandle(s.id).result()).toBe('expired');
    await keepHistory(stack, s.id, 'session/fast-forward-expiry');

    expectError(await fastForwardSession(m.secretKey, s.id, { seconds: 60 }), 409, 'session_not_open');
  });

  it("moves the slow button's 90 seconds: 80 leave it pending, 10 more and the amount rule decides", async () => {
    const m = await buildMerchant(stack.db);
    const { s, attemptId, pub } = await pendingAttempt(m, 25000);
    await pub('POST', `/test-gateway/${attemptId}/decide`, { body: { decision: 'slow' } });
    await untilHistoryEndsWith(stack, s.id, 'timer 90 s: slow button: no answer for 90 s');

    expect((await fastForwardSession(m.secretKey, s.id, { seconds: 80 })).status).toBe(200);
    await until(async () => (await historyOf(s.id)).includes('signal sessionFastForwarded'), 'the signal');
    await new Promise((r) => setTimeout(r, 500));
    expect((await attemptRow(attemptId)).status).toBe('pending');
    expect(Number((await attemptRow(attemptId)).fast_forwarded_ms)).toBe(80 * SECOND);

    expect((await fastForwardSession(m.secretKey, s.id, { seconds: 10 })).status).toBe(200);
    await until(async () => (await sessionRead(m, s.id)).status === 'completed', 'the payment');
    expect((await attemptRow(attemptId)).status).toBe('succeeded');
    expect(await sessionEvents(stack.db, s.id, 'checkout.session.completed')).toHaveLength(1);
    await keepHistory(stack, s.id, 'session/fast-forward-slow-button');
  });

  it("moves amount rule 003's 30 seconds: the attempt succeeds at once", async () => {
    const m = await buildMerchant(stack.db);
    const { s, attemptId, pub } = await pendingAttempt(m, 25003);
    await pub('GET', `/sessions/${s.code}/attempts/${attemptId}`); // the shopper returns without a button
    await untilHistoryEndsWith(stack, s.id, 'timer 30 s: amount rule 003: pending for 30 s');
    expect((await fastForwardSession(m.secretKey, s.id, { seconds: 30 })).status).toBe(200);
    await until(async () => (await attemptRow(attemptId)).status === 'succeeded', 'the delayed success');
    expect((await sessionRead(m, s.id)).payment_status).toBe('paid');
  });

  it("moves 002's 24 hours: the attempt fails with timeout, then the session expires, each with its event", async () => {
    const m = await buildMerchant(stack.db);
    const { s, attemptId, pub } = await pendingAttempt(m, 25002);
    await pub('GET', `/sessions/${s.code}/attempts/${attemptId}`);
    await untilHistoryEndsWith(
      stack,
      s.id,
      'timer 30 s: re-check backoff (fails with timeout 24 h after the attempt began)',
    );
    const res = await fastForwardSession(m.secretKey, s.id, { seconds: attemptSchedule.timeoutMs / SECOND });
    expect(res.status).toBe(200);
    expect(res.body.status).toBe('processing');
    await until(async () => (await attemptRow(attemptId)).status === 'failed', 'the timeout');
    expect((await attemptRow(attemptId)).failure_reason).toBe('timeout');
    // 24 hours on, expires_at (2 hours ahead) has passed too: the failed attempt expires the session.
    await until(async () => (await sessionRead(m, s.id)).status === 'expired', 'the expiry');
    const failed = await sessionEvents(stack.db, s.id, 'payment.attempt.failed');
    expect(failed.map((e) => e.data_object.failed_attempt.reason)).toEqual(['timeout']);
    expect(await sessionEvents(stack.db, s.id, 'checkout.session.expired')).toHaveLength(1);
    await keepHistory(stack, s.id, 'session/fast-forward-002-timeout');
  });

  it("answers 404 for an unknown or another merchant's session, 400 for a bad body, 403 for a live key or a missing scope", async () => {
    const m = await buildMerchant(stack.db);
    const s = await sessionExpiringIn(m, HOUR);
    expectError(await fastForwardSession(m.secretKey, 'cs_test_nope', { seconds: 60 }), 404, 'session_not_found');
    expectError(await fastForwardSession(m.secretKey, 'cs%00x', { seconds: 60 }), 404, 'session_not_found');
    const other = await buildMerchant(stack.db);
    expectError(await fastForwardSession(other.secretKey, s.id, { seconds: 60 }), 404, 'session_not_found');
    expectError(await fastForwardSession(m.secretKey, s.id, { seconds: 0 }), 400, 'validation_error', [
      { field: 'seconds', issue: SECONDS_ISSUE },
    ]);
    expectError(await fastForwardSession(m.secretKey, s.id, { seconds: 1.5 }), 400, 'validation_error', [
      { field: 'seconds', issue: SECONDS_ISSUE },
    ]);
    expectError(await fastForwardSession(m.secretKey, s.id, {}), 400, 'validation_error', [
      { field: 'seconds', issue: SECONDS_ISSUE },
    ]);
    const live = await buildMerchant(stack.db, { mode: 'live' });
    const res = await fastForwardSession(live.secretKey, s.id, { seconds: 60 });
    expectError(res, 403, 'forbidden');
    expect(res.body.error.message).toBe('Test helpers take test keys only.');
    const readOnly = await buildMerchant(stack.db, { scopes: ['sessions:read'] });
    const scoped = await fastForwardSession(readOnly.secretKey, s.id, { seconds: 60 });
    expectError(scoped, 403, 'insufficient_scope');
    expect(scoped.body.error.message).toBe('This key lacks the sessions:write scope.');
    expect((await sessionRead(m, s.id)).expires_at).toBe(s.expires_at);
  });
});

describe('POST /v1/test_helpers/webhook_endpoints/{id}/fast_forward', () => {
  const { webhookMerchant, createEndpoint, sendTest } = webhookSteps(() => stack);
  /** A test endpoint answering 503, with one event whose first attempt has been made. */
  async function failingEndpoint() {
    const m = await webhookMerchant();
    const path = `/hook-${randomString(10)}`;
    const endpoint = await createEndpoint(m.secretKey, receiver.url(path));
    const eventId = await sendTest(m.secretKey, endpoint.id);
    await deliveriesAtLeast(m, eventId, 1);
    return { m, contactEmail: m.contactEmail, path, endpoint, eventId };
  }
  const deliveries = async (m: Merchant, eventId: string) =>
    (await call(stack.baseUrl, 'GET', `/v1/events/${eventId}`, { key: m.secretKey })).body.deliveries as any[];
  async function deliveriesAtLeast(m: Merchant, eventId: string, n: number) {
    await until(async () => (await deliveries(m, eventId)).length >= n, `${n} deliveries`);
    return deliveries(m, eventId);
  }
  const readEndpoint = async (m: Merchant, id: string) =>
    (await call(stack.baseUrl, 'GET', `/v1/webhook_endpoints/${id}`, { key: m.secretKey })).body;

  it('sends a pending retry now, and the schedule goes on from the attempt made', async () => {
    const { m, endpoint, eventId, path } = await failingEndpoint();
    const [first] = await deliveries(m, eventId);
    expect(Date.parse(first.next_retry_at) - Date.parse(first.delivered_at)).toBe(retryDelaysMs[0]);

    const res = await fastForwardEndpoint(m.secretKey, endpoint.id, { seconds: 60 });
    expect(res.status).toBe(200);
    expect(res.body).toMatchObject({ id: endpoint.id, object: 'webhook_endpoint', status: 'enabled' });
    const rows = await deliveriesAtLeast(m, eventId, 2);
    expect(rows.map((d) => [d.attempt_no, d.status_code])).toEqual([
      [1, 503],
      [2, 503],
    ]);
    expect(Date.parse(rows[1].next_retry_at) - Date.parse(rows[1].delivered_at)).toBe(retryDelaysMs[1]);
    expect(receiver.requests.filter((r) => r.path === path)).toHaveLength(2);
  });

  it('runs out the 3-day failure clock: 71 hours leave the endpoint enabled (with the 24-hour e-mail), one more disables it and e-mails', async () => {
    const { m, contactEmail, endpoint, eventId } = await failingEndpoint();
    const subjects = async () =>
      (await stack.db('outbox').where({ kind: 'email', to: contactEmail }).orderBy('created_at')).map(
        (e: { subject: string }) => e.subject,
      );

    expect((await fastForwardEndpoint(m.secretKey, endpoint.id, { seconds: 71 * 3600 })).status).toBe(200);
    await deliveriesAtLeast(m, eventId, 2); // the retry due within those hours was sent
    await until(async () => (await subjects()).length > 0, 'the 24-hour failing e-mail');
    await new Promise((r) => setTimeout(r, 1000));
    expect(await readEndpoint(m, endpoint.id)).toMatchObject({ status: 'enabled', disabled_reason: null });
    expect(await subjects()).toEqual([`Webhook endpoint failing: ${endpoint.url}`]);

    expect((await fastForwardEndpoint(m.secretKey, endpoint.id, { seconds: 3600 })).status).toBe(200);
    await until(async () => (await readEndpoint(m, endpoint.id)).status === 'disabled', 'the disable');
    expect((await readEndpoint(m, endpoint.id)).disabled_reason).toBe('delivery_failures');
    await until(async () => (await subjects()).length > 1, 'the disable e-mail');
    expect(await subjects()).toEqual([
      `Webhook endpoint failing: ${endpoint.url}`,
      `Webhook endpoint disabled: ${endpoint.url}`,
    ]);
    expect(DISABLE_AFTER_FAILING_MS).toBe(72 * 3600 * SECOND);
    await keepHistory(stack, endpoint.id, 'delivery/fast-forward-disable');
  });

  it('answers 404 for an unknown endpoint, 400 for a bad body, 403 for a live key or a missing scope', async () => {
    const { m, endpoint } = await failingEndpoint();
    expectError(await fastForwardEndpoint(m.secretKey, 'we_nope', { seconds: 60 }), 404, 'endpoint_not_found');
    expectError(await fastForwardEndpoint(m.secretKey, 'we%00x', { seconds: 60 }), 404, 'endpoint_not_found');
    expectError(await fastForwardEndpoint(m.secretKey, endpoint.id, { seconds: -5 }), 400, 'validation_error', [
      { field: 'seconds', issue: SECONDS_ISSUE },
    ]);
    expectError(
      await fastForwardEndpoint(m.secretKey, endpoint.id, { seconds: 60, extra: true }),
      400,
      'validation_error',
      [{ field: 'extra', issue: 'Unrecognized key' }],
    );
    const live = await buildMerchant(stack.db, { mode: 'live' });
    expectError(await fastForwardEndpoint(live.secretKey, endpoint.id, { seconds: 60 }), 403, 'forbidden');
    const noWebhooks = await buildMerchant(stack.db, { scopes: ['sessions:write'] });
    const scoped = await fastForwardEndpoint(noWebhooks.secretKey, endpoint.id, { seconds: 60 });
    expectError(scoped, 403, 'insufficient_scope');
    expect(scoped.body.error.message).toBe('This key lacks the webhooks:manage scope.');
  });
});

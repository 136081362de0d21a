import { randomString } from '../../src/lib/ids';
import {
  DISABLE_AFTER_FAILING_MS,
  MAX_ATTEMPTS,
  NOTIFY_AFTER_FAILING_MS,
  retryDelaysMs,
} from '../../src/webhooks/schedule';
import { call } from '../helpers/http';
import { HttpsReceiver, RECEIVER_HOST, startHttpsReceiver } from '../helpers/https-receiver';
import { keepHistory } from '../helpers/histories';
import { startStack, Stack } from '../helpers/stack';
import { until, webhookSteps } from '../helpers/webhooks';

/**
 * The delivery workflow on the time-skipping server, against a real HTTPS receiver: the exact
 * 8-attempt schedule, the 24-hour failing e-mail, the 3-day disable and its e-mail, the reset by one success, redelivery after
 * re-enabling (continue-as-new and the Postgres queue itself: webhooks-queue.test.ts).
 */
let stack: Stack;
let receiver: HttpsReceiver;
const { webhookMerchant, createEndpoint, sendTest } = webhookSteps(() => stack);
beforeAll(async () => {
  receiver = await startHttpsReceiver();
  stack = await startStack({ WEBHOOK_ALLOWED_HOSTS: RECEIVER_HOST, WEBHOOK_EXTRA_CA_PATH: receiver.caPath });
});
afterAll(async () => {
  await stack.stop();
  await receiver.close();
});

const MINUTE = 60_000;
const HOUR = 60 * MINUTE;
const path = () => `/hook-${randomString(10)}`;
const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));
/** Paths whose requests fail, each test adding its own; everything else answers 200. */
const failing = new Set<string>();
beforeAll(() => {
  receiver.respond = (r) => ({ status: failing.has(r.path) ? 503 : 200 });
});

const deliveries = async (key: string, id: string) =>
  (await call(stack.baseUrl, 'GET', `/v1/events/${id}`, { key })).body.deliveries as any[];
const deliveriesAtLeast = (key: string, id: string, n: number) =>
  until(
    () => deliveries(key, id),
    (d) => d.length >= n,
    `${n} deliveries`,
  );
const readEndpoint = async (key: string, id: string) =>
  (await call(stack.baseUrl, 'GET', `/v1/webhook_endpoints/${id}`, { key })).body;
const emailsTo = (to: string) => stack.db('outbox').where({ kind: 'email', to }).orderBy('created_at');
const subjects = async (to: string) => (await emailsTo(to)).map((e: { subject: string }) => e.subject);

/** A failing endpoint with one event whose first attempt has been made; returns when that was. */
async function failingEndpointWithEvent() {
  const m = await webhookMerchant();
  const p = path();
  failing.add(p);
  const endpoint = await createEndpoint(m.secretKey, receiver.url(p));
  const eventId = await sendTest(m.secretKey, endpoint.id);
  const [first] = await deliveriesAtLeast(m.secretKey, eventId, 1);
  return { m, p, endpoint, eventId, firstFailureMs: Date.parse(first.delivered_at) };
}

/** Lets one test event through to the failing endpoint at `p`, then makes it fail again. */
async function oneSuccess(key: string, p: string, endpointId: string) {
  failing.delete(p);
  const ok = await sendTest(key, endpointId);
  await until(
    () => deliveries(key, ok),
    (d) => d[0]?.status_code === 200,
    'the success',
  );
  failing.add(p);
}

/** Skips Temporal time to `firstFailureMs + offsetMs` (the workflow clock), then lets the activities settle. */
async function skipTo(firstFailureMs: number, offsetMs: number) {
  const now = await stack.env.currentTimeMs();
  await stack.env.sleep(Math.max(1, firstFailureMs + offsetMs - now));
  await sleep(300);
}

it('makes 8 attempts in all to a receiver that always fails, waiting 1 min, 5 min, 30 min, 2 h, 6 h, 24 h and 24 h', async () => {
  const { m, p, eventId } = await failingEndpointWithEvent();
  const total = retryDelaysMs.reduce((a, b) => a + b, 0);
  await stack.env.sleep(total + MINUTE);
  const rows = await deliveriesAtLeast(m.secretKey, eventId, MAX_ATTEMPTS);
  expect(rows.map((d) => [d.attempt_no, d.status_code, d.error])).toEqual(
    Array.from({ length: 8 }, (_, i) => [i + 1, 503, 'http_503']),
  );
  rows.forEach((row, i) => {
    const at = Date.parse(row.delivered_at);
    if (i < 7) {
      expect(Date.parse(row.next_retry_at) - at).toBe(retryDelaysMs[i]);
      const next = Date.parse(rows[i + 1].delivered_at);
      expect(next - Date.parse(row.next_retry_at)).toBeGreaterThanOrEqual(0);
      expect(next - Date.parse(row.next_retry_at)).toBeLessThan(1000);
    } else {
      expect(row.next_retry_at).toBeNull();
    }
  });
  await stack.env.sleep('2 days');
  await sleep(300);
  expect(await deliveries(m.secretKey, eventId)).toHaveLength(8);
  expect(receiver.requests.filter((r) => r.path === p)).toHaveLength(8);
  await keepHistory(
    stack,
    (await stack.db('event_deliveries').where({ event_id: eventId }).first()).endpoint_id,
    'delivery/retried-eight-times',
  );
});

it('e-mails the merchant contact once after 24 hours of continuous failure, then disables at 3 days with the disable e-mail', async () => {
  const { m, p, endpoint, firstFailureMs } = await failingEndpointWithEvent();
  const waiting = await sendTest(m.secretKey, endpoint.id); // a second event waits too
  await deliveriesAtLeast(m.secretKey, waiting, 1);
  await skipTo(firstFailureMs, NOTIFY_AFTER_FAILING_MS - MINUTE);
  expect(await emailsTo(m.contactEmail)).toEqual([]);

  await stack.env.sleep('2 minutes');
  const [notice] = await until(
    () => emailsTo(m.contactEmail),
    (e) => e.length > 0,
    'the failing e-mail',
  );
  const { display_name: name } = await stack.db('merchants').where({ id: m.merchantId }).first();
  const since = new Date(firstFailureMs).toISOString();
  const disableAt = new Date(firstFailureMs + DISABLE_AFTER_FAILING_MS).toISOString();
  expect(notice.subject).toBe(`Webhook endpoint failing: ${endpoint.url}`);
  expect(notice.body).toBe(
    [
      `Hello ${name},`,
      '',
      `Every delivery to your test webhook endpoint ${endpoint.id} (${endpoint.url}) has failed`,
      `since ${since}. The last error: http_503.`,
      '2 events are waiting for it; each is retried on its schedule.',
      '',
      `Unless a delivery succeeds first, the endpoint will be disabled at ${disableAt}.`,
      'GET /v1/events/{id} shows each attempt with what your endpoint answered and how long it took;',
      'GET /v1/events?delivery_success=false lists the events it has not received.',
    ].join('\n'),
  );
  expect(receiver.requests.filter((r) => r.path === p).length).toBeGreaterThan(2); // retries kept failing

  await skipTo(firstFailureMs, DISABLE_AFTER_FAILING_MS - MINUTE);
  expect(await readEndpoint(m.secretKey, endpoint.id)).toMatchObject({ status: 'enabled', disabled_reason: null });
  expect(await subjects(m.contactEmail)).toEqual([`Webhook endpoint failing: ${endpoint.url}`]);

  await stack.env.sleep('2 minutes');
  const disabled = await until(
    () => readEndpoint(m.secretKey, endpoint.id),
    (e) => e.status === 'disabled',
    'the disable',
  );
  expect(disabled.disabled_reason).toBe('delivery_failures');
  const emails = await until(
    () => emailsTo(m.contactEmail),
    (e) => e.length >= 2,
    'the disable e-mail',
  );
  expect(emails.map((e: { subject: string }) => e.subject)).toEqual([
    `Webhook endpoint failing: ${endpoint.url}`,
    `Webhook endpoint disabled: ${endpoint.url}`,
  ]);
  expect(emails[1].body).toContain(endpoint.id);
  await keepHistory(stack, endpoint.id, 'delivery/disabled-after-3-days');
});

it('sends no failing e-mail when a delivery succeeds within 24 hours; the next streak gets its own, once', async () => {
  const { m, p, endpoint, firstFailureMs } = await failingEndpointWithEvent();
  await skipTo(firstFailureMs, 20 * HOUR);
  await oneSuccess(m.secretKey, p, endpoint.id);
  const next = await sendTest(m.secretKey, endpoint.id);
  const [restart] = await deliveriesAtLeast(m.secretKey, next, 1);
  const restartMs = Date.parse(restart.delivered_at);

  await skipTo(firstFailureMs, NOTIFY_AFTER_FAILING_MS + HOUR);
  expect(await emailsTo(m.contactEmail)).toEqual([]);
  await skipTo(restartMs, NOTIFY_AFTER_FAILING_MS - MINUTE);
  expect(await emailsTo(m.contactEmail)).toEqual([]);

  await skipTo(restartMs, NOTIFY_AFTER_FAILING_MS + MINUTE);
  const [notice] = await until(
    () => emailsTo(m.contactEmail),
    (e) => e.length > 0,
    'the failing e-mail of the new streak',
  );
  expect(notice.body).toContain(`since ${new Date(restartMs).toISOString()}.`);
  await skipTo(restartMs, 2 * NOTIFY_AFTER_FAILING_MS);
  expect(await subjects(m.contactEmail)).toEqual([`Webhook endpoint failing: ${endpoint.url}`]);
  await keepHistory(stack, endpoint.id, 'delivery/failing-e-mail-after-success');
});

it('does not disable when one success interrupts the failures: the clock restarts at the next failure', async () => {
  const { m, p, endpoint, eventId, firstFailureMs } = await failingEndpointWithEvent();
  await skipTo(firstFailureMs, 2 * 24 * HOUR);
  await oneSuccess(m.secretKey, p, endpoint.id);

  await skipTo(firstFailureMs, DISABLE_AFTER_FAILING_MS + HOUR);
  expect((await readEndpoint(m.secretKey, endpoint.id)).status).toBe('enabled');
  // The first streak's 24-hour e-mail only: no disable e-mail.
  expect(await subjects(m.contactEmail)).toEqual([`Webhook endpoint failing: ${endpoint.url}`]);

  // The first event's last attempt (after the success) failed: 3 days from it, the endpoint goes.
  const rows = await deliveries(m.secretKey, eventId);
  const lastFailureMs = Date.parse(rows[MAX_ATTEMPTS - 1].delivered_at);
  await skipTo(lastFailureMs, DISABLE_AFTER_FAILING_MS + MINUTE);
  await until(
    () => readEndpoint(m.secretKey, endpoint.id),
    (e) => e.status === 'disabled',
    'the disable 3 days after the new failure',
  );
  await keepHistory(stack, endpoint.id, 'delivery/success-restarts-failing-clock');
});

it('redelivers to an endpoint once it is enabled again after a disable', async () => {
  const { m, p, endpoint, eventId, firstFailureMs } = await failingEndpointWithEvent();
  await skipTo(firstFailureMs, DISABLE_AFTER_FAILING_MS + MINUTE);
  await until(
    () => readEndpoint(m.secretKey, endpoint.id),
    (e) => e.status === 'disabled',
    'the disable',
  );
  const redeliver = () => call(stack.baseUrl, 'POST', `/v1/events/${eventId}/redeliver`, { key: m.secretKey });
  expect((await redeliver()).body).toEqual({ endpoints: 0 });

  failing.delete(p);
  const enabled = await call(stack.baseUrl, 'PATCH', `/v1/webhook_endpoints/${endpoint.id}`, {
    key: m.secretKey,
    body: { status: 'enabled' },
  });
  expect(enabled.body).toMatchObject({ status: 'enabled', disabled_reason: null });
  const res = await redeliver();
  expect([res.status, res.body]).toEqual([202, { endpoints: 1 }]);
  const rows = await deliveriesAtLeast(m.secretKey, eventId, MAX_ATTEMPTS + 1);
  expect(rows[MAX_ATTEMPTS]).toMatchObject({ attempt_no: 1, status_code: 200, error: null, next_retry_at: null });
  await keepHistory(stack, endpoint.id, 'delivery/redelivered-after-reenable');
});

import { Webhook as StandardWebhook } from 'standardwebhooks';
import Stripe from 'stripe';
import { createDeliveryActivities } from '../../activities/delivery';
import { recordEvent, EventType } from '../../src/checkout/events';
import type { KeyMode } from '../../src/keys/keys';
import { newId, randomString } from '../../src/lib/ids';
import { createCheckoutKey } from '../../src/ops/checkout-keys';
import { wakeEndpoint } from '../../src/temporal/delivery';
import { wakeTargets } from '../../src/webhooks/route-and-wake';
import { deliveryAgent, postWebhook } from '../../src/webhooks/send';
import { newSigningSecret } from '../../src/webhooks/sign';
import { checkWebhookUrl } from '../../src/webhooks/url-safety';
import { verify } from '../../src/webhooks/verify';
import { buildMerchant } from '../helpers/factories';
import { call } from '../helpers/http';
import {
  HttpsReceiver,
  RECEIVER_HOST,
  ReceivedRequest,
  SCRIPTED_HOST,
  startHttpsReceiver,
  testHosts,
} from '../helpers/https-receiver';
import { keepHistory } from '../helpers/histories';
import { startStack, Stack } from '../helpers/stack';
import { until, webhookSteps } from '../helpers/webhooks';

/**
 * Webhook deliveries to a real HTTPS receiver on loopback (self-signed certificate trusted through
 * WEBHOOK_EXTRA_CA_PATH, its host on the allow-list): signatures checked with the merchant helper,
 * headers, rotation, redirects, the 10-second timeout, URL safety at delivery, modes, deletion,
 * redelivery and dispatch after crashes. Real time except where a test skips Temporal time.
 */
let stack: Stack;
let receiver: HttpsReceiver;
const { webhookMerchant, createEndpoint, sendTest } = webhookSteps(() => stack);
beforeAll(async () => {
  receiver = await startHttpsReceiver();
  stack = await startStack({
    WEBHOOK_ALLOWED_HOSTS: `${RECEIVER_HOST},${SCRIPTED_HOST}`,
    WEBHOOK_EXTRA_CA_PATH: receiver.caPath,
  });
});
afterAll(async () => {
  await stack.stop();
  await receiver.close();
});
beforeEach(() => {
  receiver.respond = () => ({ status: 200 });
});

const DAY = 24 * 60 * 60 * 1000;
const path = () => `/hook-${randomString(10)}`;
const header = (r: ReceivedRequest, name: string) => r.headers[name] as string;
const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));
const stripe = new Stripe('sk_test_unused');
/** A delivery as Stripe's SDK verifies it, given our `Svc-Signature` in place of `Stripe-Signature`. */
const stripeVerify = (r: ReceivedRequest, secret: string, body = r.body) =>
  stripe.webhooks.constructEvent(body, header(r, 'svc-signature'), secret);
/** A delivery as the Standard Webhooks library verifies it, from the `webhook-*` headers. */
const standardVerify = (r: ReceivedRequest, secret: string, body = r.body) =>
  new StandardWebhook(secret).verify(body, r.headers as Record<string, string>);

const readEvent = async (key: string, id: string) =>
  (await call(stack.baseUrl, 'GET', `/v1/events/${id}`, { key })).body;
const deliveries = async (key: string, id: string) => (await readEvent(key, id)).deliveries as any[];
const deliveriesAtLeast = (key: string, id: string, n: number, what = `${n} deliveries`, timeoutMs = 15_000) =>
  until(
    () => deliveries(key, id),
    (d) => d.length >= n,
    what,
    timeoutMs,
  );

/** A state change as a transition makes it: the event recorded in the transition's transaction. */
async function stateChange(merchantId: string, mode: KeyMode, type: EventType) {
  return stack.db.transaction((trx) =>
    recordEvent(trx, {
      merchantId,
      mode,
      type,
      object: { id: newId('cs', mode), object: 'checkout.session' },
      now: stack.clock(),
    }),
  );
}

describe('signing and headers', () => {
  it('delivers a signed test event that the verify helper accepts, with the spec’s headers and compact JSON', async () => {
    const m = await webhookMerchant();
    const p = path();
    const endpoint = await createEndpoint(m.secretKey, receiver.url(p));
    const eventId = await sendTest(m.secretKey, endpoint.id, 'refund.succeeded');
    const [request] = await receiver.waitFor(1, p);

    expect(request.method).toBe('POST');
    expect(header(request, 'content-type')).toBe('application/json');
    expect(header(request, 'svc-event-id')).toBe(eventId);
    expect(header(request, 'svc-event-type')).toBe('refund.succeeded');
    expect(header(request, 'svc-signature')).toMatch(/^t=\d+,v1=[0-9a-f]{64}$/);
    expect(header(request, 'webhook-id')).toBe(eventId);
    expect(header(request, 'webhook-timestamp')).toBe(/^t=(\d+),/.exec(header(request, 'svc-signature'))![1]);
    expect(header(request, 'webhook-signature')).toMatch(/^v1,[A-Za-z0-9+/]{43}=$/);
    const event = verify(request.body, header(request, 'svc-signature'), [endpoint.secret]);
    expect(stripeVerify(request, endpoint.secret)).toEqual(event);
    expect(standardVerify(request, endpoint.secret)).toEqual(event);

    const { deliveries: _rows, ...read } = await readEvent(m.secretKey, eventId);
    expect(request.body).toBe(JSON.stringify(read));
    expect(event).toEqual(read);
    expect(event.data.object).toEqual({
      id: expect.stringMatching(/^cs_test_/),
      object: 'checkout.session',
      sample: true,
      type: 'refund.succeeded',
    });
    const listed = await call(stack.baseUrl, 'GET', '/v1/events?type=refund.succeeded', { key: m.secretKey });
    expect(listed.body.data.map((e: { id: string }) => e.id)).toEqual([eventId]);
    const session = await call(stack.baseUrl, 'GET', `/v1/checkout/sessions/${event.data.object.id}`, {
      key: m.secretKey,
    });
    expect(session.body.error.code).toBe('session_not_found');
    await keepHistory(stack, endpoint.id, 'delivery/delivered');
  });

  it('records each attempt in the event’s deliveries', async () => {
    const m = await webhookMerchant();
    const endpoint = await createEndpoint(m.secretKey, receiver.url(path()));
    const eventId = await sendTest(m.secretKey, endpoint.id);
    const [row] = await deliveriesAtLeast(m.secretKey, eventId, 1);
    expect(row).toEqual({
      endpoint_id: endpoint.id,
      attempt_no: 1,
      status_code: 200,
      error: null,
      delivered_at: expect.stringMatching(/Z$/),
      next_retry_at: null,
      duration_ms: expect.any(Number),
      response_body: 'ok',
    });
  });

  it('sends a test event to the tested endpoint only', async () => {
    const m = await webhookMerchant();
    const [p1, p2] = [path(), path()];
    const tested = await createEndpoint(m.secretKey, receiver.url(p1));
    await createEndpoint(m.secretKey, receiver.url(p2));
    const eventId = await sendTest(m.secretKey, tested.id);
    await receiver.waitFor(1, p1);
    await sleep(700);
    expect(receiver.requests.filter((r) => r.path === p2)).toEqual([]);
    expect((await deliveries(m.secretKey, eventId)).map((d) => d.endpoint_id)).toEqual([tested.id]);
  });

  it('signs with both secrets during a rotation, and with the new one only after 24 hours', async () => {
    const m = await webhookMerchant();
    const p = path();
    const endpoint = await createEndpoint(m.secretKey, receiver.url(p));
    const rotated = await call(stack.baseUrl, 'POST', `/v1/webhook_endpoints/${endpoint.id}/rotate_secret`, {
      key: m.secretKey,
    });
    const [oldSecret, newSecret] = [endpoint.secret, rotated.body.secret];

    await sendTest(m.secretKey, endpoint.id);
    const [during] = await receiver.waitFor(1, p);
    expect(header(during, 'svc-signature').match(/v1=/g)).toHaveLength(2);
    expect(verify(during.body, header(during, 'svc-signature'), [oldSecret]).id).toBeDefined();
    expect(verify(during.body, header(during, 'svc-signature'), [newSecret]).id).toBeDefined();
    expect(header(during, 'webhook-signature')).toMatch(/^v1,\S{44} v1,\S{44}$/);
    for (const secret of [oldSecret, newSecret]) {
      expect(stripeVerify(during, secret).id).toBe(header(during, 'svc-event-id'));
      expect(standardVerify(during, secret)).toMatchObject({ id: header(during, 'svc-event-id') });
    }

    stack.clock.advance(DAY + 1000);
    try {
      await sendTest(m.secretKey, endpoint.id);
      const [, after] = await receiver.waitFor(2, p);
      const now = () => stack.clock().getTime();
      expect(header(after, 'svc-signature').match(/v1=/g)).toHaveLength(1);
      expect(verify(after.body, header(after, 'svc-signature'), [newSecret], 300, now).id).toBeDefined();
      expect(() => verify(after.body, header(after, 'svc-signature'), [oldSecret], 300, now)).toThrow(
        /No signature matches/,
      );
      expect(header(after, 'webhook-signature')).toMatch(/^v1,\S{44}$/);
    } finally {
      stack.clock.advance(-(DAY + 1000));
    }
  });

  it('refuses a tampered body in our verify, Stripe’s SDK and the Standard Webhooks library alike', async () => {
    const m = await webhookMerchant();
    const p = path();
    const endpoint = await createEndpoint(m.secretKey, receiver.url(p));
    await sendTest(m.secretKey, endpoint.id);
    const [request] = await receiver.waitFor(1, p);
    const tampered = request.body.replace('"livemode":false', '"livemode":true');
    expect(tampered).not.toBe(request.body);
    expect(() => verify(tampered, header(request, 'svc-signature'), [endpoint.secret])).toThrow(/No signature matches/);
    expect(() => stripeVerify(request, endpoint.secret, tampered)).toThrow(
      Stripe.errors.StripeSignatureVerificationError,
    );
    expect(() => standardVerify(request, endpoint.secret, tampered)).toThrow('No matching signature found');
    expect(() => standardVerify(request, newSigningSecret(), request.body)).toThrow('No matching signature found');
  });

  it('puts a new timestamp and signature on every attempt of the same event', async () => {
    const m = await webhookMerchant();
    const p = path();
    let calls = 0;
    receiver.respond = (r) => (r.path === p && ++calls === 1 ? { status: 503 } : { status: 200 });
    const endpoint = await createEndpoint(m.secretKey, receiver.url(p));
    const eventId = await sendTest(m.secretKey, endpoint.id);
    await receiver.waitFor(1, p);
    stack.clock.advance(61_000); // the wall clock moves with Temporal's
    try {
      await stack.env.sleep('1 minute');
      const [first, second] = await receiver.waitFor(2, p);
      const t = (r: ReceivedRequest) => Number(/t=(\d+)/.exec(header(r, 'svc-signature'))![1]);
      expect(t(second) - t(first)).toBeGreaterThanOrEqual(60);
      expect(header(second, 'svc-signature')).not.toBe(header(first, 'svc-signature'));
      expect(second.body).toBe(first.body);
      expect(header(second, 'svc-event-id')).toBe(eventId);
      const now = () => stack.clock().getTime();
      for (const r of [first, second]) expect(verify(r.body, header(r, 'svc-signature'), endpoint.secret, 300, now));
    } finally {
      stack.clock.advance(-61_000);
    }
  });
});

describe('failures', () => {
  it('records a non-2xx answer as http_<status> with its status code and schedules the retry a minute later', async () => {
    const m = await webhookMerchant();
    const p = path();
    receiver.respond = (r) => (r.path === p ? { status: 503 } : { status: 200 });
    const endpoint = await createEndpoint(m.secretKey, receiver.url(p));
    const [row] = await deliveriesAtLeast(m.secretKey, await sendTest(m.secretKey, endpoint.id), 1);
    expect(row).toMatchObject({ attempt_no: 1, status_code: 503, error: 'http_503' });
    expect(Date.parse(row.next_retry_at) - Date.parse(row.delivered_at)).toBe(60_000);
  });

  it('never follows a redirect: a 3xx fails the attempt', async () => {
    const m = await webhookMerchant();
    const [p, elsewhere] = [path(), path()];
    receiver.respond = (r) =>
      r.path === p ? { status: 302, headers: { location: receiver.url(elsewhere) } } : { status: 200 };
    const endpoint = await createEndpoint(m.secretKey, receiver.url(p));
    const [row] = await deliveriesAtLeast(m.secretKey, await sendTest(m.secretKey, endpoint.id), 1);
    expect(row).toMatchObject({ status_code: 302, error: 'http_302', next_retry_at: expect.any(String) });
    await sleep(500);
    expect(receiver.requests.filter((r) => r.path === elsewhere)).toEqual([]);
  });

  it('fails an attempt with no answer within 10 seconds as timeout', async () => {
    const m = await webhookMerchant();
    const p = path();
    receiver.respond = (r) => (r.path === p ? { status: 200, delayMs: 12_000 } : { status: 200 });
    const endpoint = await createEndpoint(m.secretKey, receiver.url(p));
    const eventId = await sendTest(m.secretKey, endpoint.id);
    const [request] = await receiver.waitFor(1, p);
    const [row] = await deliveriesAtLeast(m.secretKey, eventId, 1, 'the timeout', 20_000);
    const recorded = await stack.db('event_deliveries').where({ event_id: eventId }).first('created_at');
    expect(row).toMatchObject({ attempt_no: 1, status_code: null, error: 'timeout' });
    const waited = recorded.created_at.getTime() - request.at;
    expect(waited).toBeGreaterThanOrEqual(9_900);
    expect(waited).toBeLessThan(11_500);
  }, 30_000);
});

describe('URL safety at delivery', () => {
  it('checks the resolved address again at each delivery and refuses one that became private', async () => {
    const m = await webhookMerchant();
    const host = `moving-${randomString(6).toLowerCase()}.webhooks.test`;
    testHosts.set(host, ['93.184.215.14']);
    const endpoint = await createEndpoint(m.secretKey, `https://${host}:${receiver.port}/hook`);
    testHosts.set(host, ['127.0.0.1']);
    const [row] = await deliveriesAtLeast(m.secretKey, await sendTest(m.secretKey, endpoint.id), 1);
    expect(row).toMatchObject({ attempt_no: 1, status_code: null, error: 'private_target' });
    expect(row.next_retry_at).not.toBeNull();
    expect(receiver.requests.filter((r) => header(r, 'svc-event-id') === row.event_id)).toEqual([]);
  });

  it('connects to the address it checked, never resolving the name a second time', async () => {
    const m = await webhookMerchant();
    let lookups = 0;
    // The first two lookups (registration, then the delivery's check) give the receiver; any later
    // one would give an address where nothing listens.
    testHosts.set(SCRIPTED_HOST, () => (++lookups <= 2 ? ['127.0.0.1'] : ['127.0.0.2']));
    const p = path();
    const endpoint = await createEndpoint(m.secretKey, `https://${SCRIPTED_HOST}:${receiver.port}${p}`);
    const [row] = await deliveriesAtLeast(m.secretKey, await sendTest(m.secretKey, endpoint.id), 1);
    expect(row).toMatchObject({ status_code: 200, error: null });
    expect(lookups).toBe(2);
  });
});

describe('fan-out', () => {
  it('sends an event to every enabled endpoint of its mode whose events list its type or *', async () => {
    const m = await webhookMerchant();
    const other = await webhookMerchant();
    const live = await createCheckoutKey(stack.db, { merchantId: m.merchantId, mode: 'live', type: 'secret' });
    const paths = { all: path(), completed: path(), refunds: path(), disabled: path(), live: path(), other: path() };
    const all = await createEndpoint(m.secretKey, receiver.url(paths.all));
    const completed = await createEndpoint(m.secretKey, receiver.url(paths.completed), {
      events: ['checkout.session.completed', 'refund.failed'],
    });
    await createEndpoint(m.secretKey, receiver.url(paths.refunds), { events: ['refund.succeeded'] });
    const disabled = await createEndpoint(m.secretKey, receiver.url(paths.disabled));
    await call(stack.baseUrl, 'PATCH', `/v1/webhook_endpoints/${disabled.id}`, {
      key: m.secretKey,
      body: { status: 'disabled' },
    });
    await createEndpoint(live.key, receiver.url(paths.live), { mode: 'live' });
    await createEndpoint(other.secretKey, receiver.url(paths.other));

    const event = await stateChange(m.merchantId, 'test', 'checkout.session.completed');
    await receiver.waitFor(1, paths.all);
    await receiver.waitFor(1, paths.completed);
    await sleep(700);
    for (const p of [paths.refunds, paths.disabled, paths.live, paths.other]) {
      expect(receiver.requests.filter((r) => r.path === p)).toEqual([]);
    }
    const rows = await deliveries(m.secretKey, event.id);
    expect(rows.map((d) => d.endpoint_id).sort()).toEqual([all.id, completed.id].sort());
  });

  it('sends test-mode events to test endpoints only and live-mode events to live endpoints only', async () => {
    const m = await webhookMerchant();
    const live = await createCheckoutKey(stack.db, { merchantId: m.merchantId, mode: 'live', type: 'secret' });
    const [testPath, livePath] = [path(), path()];
    await createEndpoint(m.secretKey, receiver.url(testPath));
    await createEndpoint(live.key, receiver.url(livePath), { mode: 'live' });
    const testEvent = await stateChange(m.merchantId, 'test', 'checkout.session.expired');
    const liveEvent = await stateChange(m.merchantId, 'live', 'checkout.session.expired');
    const [toTest] = await receiver.waitFor(1, testPath);
    const [toLive] = await receiver.waitFor(1, livePath);
    await sleep(500);
    expect(receiver.requests.filter((r) => r.path === testPath).map((r) => header(r, 'svc-event-id'))).toEqual([
      testEvent.id,
    ]);
    expect(receiver.requests.filter((r) => r.path === livePath).map((r) => header(r, 'svc-event-id'))).toEqual([
      liveEvent.id,
    ]);
    expect(JSON.parse(toTest.body).livemode).toBe(false);
    expect(JSON.parse(toLive.body).livemode).toBe(true);
  });
});

describe('deletion', () => {
  it('cancels scheduled retries at once, recorded as endpoint_deleted with no next_retry_at, and sends nothing more', async () => {
    const m = await webhookMerchant();
    const p = path();
    receiver.respond = (r) => (r.path === p ? { status: 500 } : { status: 200 });
    const endpoint = await createEndpoint(m.secretKey, receiver.url(p));
    const events = [await sendTest(m.secretKey, endpoint.id), await sendTest(m.secretKey, endpoint.id)];
    for (const id of events) await deliveriesAtLeast(m.secretKey, id, 1);
    const failing = await call(stack.baseUrl, 'GET', '/v1/events?delivery_success=false', { key: m.secretKey });
    expect(failing.body.data.map((e: { id: string }) => e.id)).toEqual([...events].reverse());

    const res = await call(stack.baseUrl, 'DELETE', `/v1/webhook_endpoints/${endpoint.id}`, { key: m.secretKey });
    expect(res.status).toBe(204);
    for (const id of events) {
      const rows = await deliveriesAtLeast(m.secretKey, id, 2, 'the cancelled retry');
      expect(rows).toEqual([
        expect.objectContaining({ attempt_no: 1, status_code: 500, error: 'http_500' }),
        {
          endpoint_id: endpoint.id,
          attempt_no: 2,
          status_code: null,
          error: 'endpoint_deleted',
          delivered_at: null,
          next_retry_at: null,
          duration_ms: null,
          response_body: null,
        },
      ]);
    }
    const undelivered = await call(stack.baseUrl, 'GET', '/v1/events?delivery_success=false', { key: m.secretKey });
    expect(undelivered.body.data).toEqual([]); // nothing left to redeliver to
    const handle = stack.env.client.workflow.getHandle(endpoint.id);
    await handle.result();
    await stack.env.sleep('2 hours');
    await sleep(300);
    expect(receiver.requests.filter((r) => r.path === p)).toHaveLength(2);
    for (const id of events) expect(await deliveries(m.secretKey, id)).toHaveLength(2);
    await keepHistory(stack, endpoint.id, 'delivery/endpoint-deleted');
  });
});

describe('redelivery', () => {
  it('answers 202 with the number of matching enabled endpoints and sends a fresh attempt: new timestamp and signature, same event id', async () => {
    const m = await webhookMerchant();
    const [p1, p2, p3] = [path(), path(), path()];
    const e1 = await createEndpoint(m.secretKey, receiver.url(p1));
    await createEndpoint(m.secretKey, receiver.url(p2), { events: ['checkout.session.canceled'] });
    const e3 = await createEndpoint(m.secretKey, receiver.url(p3));
    const event = await stateChange(m.merchantId, 'test', 'checkout.session.canceled');
    const [first] = await receiver.waitFor(1, p1);
    await receiver.waitFor(1, p2);
    await receiver.waitFor(1, p3);
    await call(stack.baseUrl, 'PATCH', `/v1/webhook_endpoints/${e3.id}`, {
      key: m.secretKey,
      body: { status: 'disabled' },
    });

    stack.clock.advance(5000);
    try {
      const res = await call(stack.baseUrl, 'POST', `/v1/events/${event.id}/redeliver`, { key: m.secretKey });
      expect(res.status).toBe(202);
      expect(res.body).toEqual({ endpoints: 2 });
      const [, again] = await receiver.waitFor(2, p1);
      await receiver.waitFor(2, p2);
      expect(header(again, 'svc-event-id')).toBe(event.id);
      expect(again.body).toBe(first.body);
      expect(header(again, 'svc-signature')).not.toBe(header(first, 'svc-signature'));
      expect(verify(again.body, header(again, 'svc-signature'), e1.secret, 300, () => stack.clock().getTime()).id).toBe(
        event.id,
      );
    } finally {
      stack.clock.advance(-5000);
    }
    const rows = await deliveriesAtLeast(m.secretKey, event.id, 5);
    expect(rows.filter((d) => d.endpoint_id === e1.id).map((d) => [d.attempt_no, d.status_code])).toEqual([
      [1, 200],
      [1, 200],
    ]);
    await sleep(300);
    expect(receiver.requests.filter((r) => r.path === p3)).toHaveLength(1);
  });

  it("answers 404 event_not_found for an unknown event or another mode's", async () => {
    const m = await webhookMerchant();
    const live = await createCheckoutKey(stack.db, { merchantId: m.merchantId, mode: 'live', type: 'secret' });
    const event = await stateChange(m.merchantId, 'test', 'checkout.session.expired');
    for (const [key, id] of [
      [m.secretKey, 'evt_test_nothing'],
      [live.key, event.id],
    ]) {
      const res = await call(stack.baseUrl, 'POST', `/v1/events/${id}/redeliver`, { key });
      expect([res.status, res.body.error.code]).toEqual([404, 'event_not_found']);
    }
  });
});

describe('at least once', () => {
  it('delivers an event whose announcement was missed (the dispatcher was down at commit) on its next sweep', async () => {
    const m = await webhookMerchant();
    const p = path();
    await createEndpoint(m.secretKey, receiver.url(p));
    const id = newId('evt', 'test');
    await stack.db('events').insert({
      id,
      merchant_id: m.merchantId,
      mode: 'test',
      type: 'checkout.session.completed',
      data_object: JSON.stringify({ id: 'cs_test_x', object: 'checkout.session' }),
      created_at: stack.clock(),
    }); // no pg_notify: as if no dispatcher was listening
    const [request] = await receiver.waitFor(1, p);
    expect(header(request, 'svc-event-id')).toBe(id);
  });

  it('delivers an event once although it is dispatched again (a dispatcher that died before marking it)', async () => {
    const m = await webhookMerchant();
    const p = path();
    const endpoint = await createEndpoint(m.secretKey, receiver.url(p));
    const event = await stateChange(m.merchantId, 'test', 'checkout.session.completed');
    await receiver.waitFor(1, p);
    await stack.db('events').where({ id: event.id }).update({ dispatched_at: null });
    await until(
      async () => (await stack.db('events').where({ id: event.id }).first()).dispatched_at,
      (at) => at !== null,
      'the second dispatch',
    );
    const [target] = await wakeTargets(stack.db, [endpoint.id]);
    await wakeEndpoint(stack.env.client, stack.taskQueue, target, 1);
    await sleep(700);
    expect(receiver.requests.filter((r) => r.path === p)).toHaveLength(1);
    expect(await deliveries(m.secretKey, event.id)).toHaveLength(1);
  });
});

describe('the delivery activity', () => {
  it('returns the recorded result when retried after recording, sending nothing again', async () => {
    const m = await buildMerchant(stack.db); // not dispatched: this test plays the workflow
    const p = path();
    const endpoint = await createEndpoint(m.secretKey, receiver.url(p));
    const event = await stack.db.transaction((trx) =>
      recordEvent(trx, {
        merchantId: m.merchantId,
        mode: 'test',
        type: 'refund.failed',
        object: { id: 're_1', object: 'refund' },
        now: stack.clock(),
      }),
    );
    const { deliverBatch } = createDeliveryActivities({
      db: stack.db,
      clock: stack.clock,
      webhooks: stack.deps.webhooks!,
    });
    const input = {
      endpointId: endpoint.id,
      attemptAtMs: Date.now(),
      deliveries: [{ eventId: event.id, generation: 0, attemptNo: 1 }],
    };
    const first = await deliverBatch(input);
    const again = await deliverBatch({ ...input, attemptAtMs: Date.now() + 5000 });
    expect(first).toEqual([expect.objectContaining({ outcome: 'delivered', statusCode: 200 })]);
    expect(again).toEqual(first);
    expect(receiver.requests.filter((r) => r.path === p)).toHaveLength(1);
  });

  it('never turns certificate verification off: a certificate it does not trust fails as tls_error', async () => {
    const check = await checkWebhookUrl(receiver.url(path()), stack.deps.webhooks!);
    if (!check.ok) throw new Error(check.issue);
    const untrusting = deliveryAgent([]);
    try {
      const result = await postWebhook(check.target, '{}', {}, { agent: untrusting, timeoutMs: 5000 });
      expect(result).toEqual({
        statusCode: null,
        error: 'tls_error',
        durationMs: expect.any(Number),
        responseBody: null,
      });
    } finally {
      untrusting.destroy();
    }
  });
});

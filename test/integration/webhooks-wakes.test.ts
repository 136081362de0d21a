import { webhookWakes } from '../../src/telemetry/webhooks';
import { randomString } from '../../src/lib/ids';
import { call } from '../helpers/http';
import { useWebhookStack, until, webhookSteps } from '../helpers/webhooks';

/**
 * The dispatcher's wakes (src/webhooks/watches.ts): while an endpoint's delivery activity watches
 * its queue, a new event's rows reach it without a wake signal, and are delivered; once the
 * activity is gone, the next event wakes the endpoint's workflow. Counted by
 * `svc_webhook_wakes_total{outcome}`, on a real receiver and the time-skipping server.
 */
const env = useWebhookStack();
const { webhookMerchant, createEndpoint, sendTest } = webhookSteps(() => env.stack);
const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

const wakes = async (outcome: 'sent' | 'skipped') =>
  (await webhookWakes.get()).values.find((v) => v.labels.outcome === outcome)?.value ?? 0;
const eventIdsAt = (path: string) =>
  env.receiver.requests.filter((r) => r.path === path).map((r) => r.headers['svc-event-id']);
const dispatched = (eventId: string) =>
  until(
    () => env.stack.db('events').where({ id: eventId }).first('dispatched_at'),
    (row) => row?.dispatched_at != null,
    `event ${eventId} dispatched`,
  );
const watching = (endpointId: string) =>
  env.stack
    .db('webhook_endpoint_watches')
    .where({ endpoint_id: endpointId })
    .where('watching_until', '>', env.stack.db.raw('clock_timestamp()'))
    .first();

test('a watched endpoint gets its new rows without a wake signal; an unwatched one is woken', async () => {
  const m = await webhookMerchant();
  const path = `/wakes-${randomString(8)}`;
  const endpoint = await createEndpoint(m.secretKey, env.receiver.url(path));
  // The first POST is held open: its activity stays in deliverDue, watching the endpoint's queue.
  let release: () => void = () => undefined;
  const held = new Promise<void>((resolve) => (release = resolve));
  let first = true;
  env.receiver.respond = (req) => {
    if (req.path !== path || !first) return { status: 200 };
    first = false;
    return { status: 200, until: held };
  };

  const sentBefore = await wakes('sent');
  const a = await sendTest(m.secretKey, endpoint.id);
  await env.receiver.waitFor(1, path);
  expect(await wakes('sent')).toBe(sentBefore + 1); // the endpoint's first event wakes (starts) its workflow
  expect(await watching(endpoint.id)).toBeDefined();

  // Watched: the next event's row is queued and announced, and no signal is sent.
  const [sent, skipped] = [await wakes('sent'), await wakes('skipped')];
  const b = await sendTest(m.secretKey, endpoint.id);
  await dispatched(b);
  await sleep(300); // a wake would be sent in the background by now
  expect(await wakes('skipped')).toBe(skipped + 1);
  expect(await wakes('sent')).toBe(sent);
  release();
  await env.receiver.waitFor(2, path);
  expect(eventIdsAt(path)).toEqual([a, b]);

  // The activity ends its watch (10 s after its last delivery: WATCH_IDLE_MS) and returns:
  // the next event wakes the workflow.
  await until(
    () => watching(endpoint.id),
    (row) => row === undefined,
    'the watch ended',
    25_000,
  );
  await sleep(200);
  const [sentAfter, skippedAfter] = [await wakes('sent'), await wakes('skipped')];
  const c = await sendTest(m.secretKey, endpoint.id);
  await dispatched(c);
  await until(
    () => wakes('sent'),
    (n) => n === sentAfter + 1,
    'the wake sent',
  );
  expect(await wakes('skipped')).toBe(skippedAfter);
  await env.receiver.waitFor(3, path);
  expect(eventIdsAt(path)).toEqual([a, b, c]);
});

test('an endpoint that keeps getting events keeps its watch past the 2-second budget: no wake, one activity', async () => {
  const m = await webhookMerchant();
  const path = `/busy-${randomString(8)}`;
  const endpoint = await createEndpoint(m.secretKey, env.receiver.url(path));
  const a = await sendTest(m.secretKey, endpoint.id);
  await env.receiver.waitFor(1, path);
  const [sent, skipped] = [await wakes('sent'), await wakes('skipped')];
  const started = Date.now();
  // Events 3 s apart: each past the budget of the activity that took the one before.
  const later: string[] = [];
  for (let i = 0; i < 2; i++) {
    await sleep(3000);
    expect(await watching(endpoint.id)).toBeDefined();
    later.push(await sendTest(m.secretKey, endpoint.id));
    await env.receiver.waitFor(2 + i, path);
  }
  expect(Date.now() - started).toBeGreaterThan(6000);
  expect(await wakes('sent')).toBe(sent);
  expect(await wakes('skipped')).toBe(skipped + 2);
  expect(eventIdsAt(path)).toEqual([a, ...later]);
});

test('an endpoint whose URL changes while its activity keeps watching: the next event goes to the new URL', async () => {
  const m = await webhookMerchant();
  const [before, after] = [`/moved-from-${randomString(8)}`, `/moved-to-${randomString(8)}`];
  const endpoint = await createEndpoint(m.secretKey, env.receiver.url(before));
  const a = await sendTest(m.secretKey, endpoint.id);
  await env.receiver.waitFor(1, before);
  // Past the activity's 2-second budget, while it still watches: it read the endpoint before then.
  await sleep(2500);
  const res = await call(env.stack.baseUrl, 'PATCH', `/v1/webhook_endpoints/${endpoint.id}`, {
    key: m.secretKey,
    body: { url: env.receiver.url(after) },
  });
  expect(res.status).toBe(200);
  expect(await watching(endpoint.id)).toBeDefined();
  const skipped = await wakes('skipped');
  const b = await sendTest(m.secretKey, endpoint.id);
  await env.receiver.waitFor(1, after);
  expect(await wakes('skipped')).toBe(skipped + 1); // taken by the watching activity, not a new one
  expect(eventIdsAt(before)).toEqual([a]);
  expect(eventIdsAt(after)).toEqual([b]);
});

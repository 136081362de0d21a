import { recordEvent } from '../../src/checkout/events';
import { newId, randomString } from '../../src/lib/ids';
import { run } from '../../src/cli/run';
import { deliveryWorkflowType, endpointDeliveryWorkflowType } from '../../src/temporal/delivery';
import { wakeEndpoint } from '../../src/temporal/delivery';
import { wakeTargets } from '../../src/webhooks/route-and-wake';
import { recordAttempts } from '../../src/webhooks/record';
import { adopt, enqueue } from '../../src/webhooks/queue';
import { patches } from '../../workflows/patches';
import type { WorkflowHandle } from '@temporalio/client';
import { setEndpointConcurrency } from '../../src/ops/webhook-endpoints';
import { buildMerchant } from '../helpers/factories';
import { call } from '../helpers/http';
import { HttpsReceiver, RECEIVER_HOST, ReceivedRequest, startHttpsReceiver } from '../helpers/https-receiver';
import { keepHistory } from '../helpers/histories';
import { startStack, Stack } from '../helpers/stack';
import { until, webhookSteps } from '../helpers/webhooks';

/**
 * The Postgres-backed delivery queue on the time-skipping server, against a real HTTPS receiver:
 * rows as the dispatcher writes them, a worker dying between the POST and the row update, the
 * replay of a time window, continue-as-new with thousands pending and nothing carried, the old
 * workflow type moving its queue into Postgres, the idle end of a run, and the concurrency setting.
 */
let stack: Stack;
let receiver: HttpsReceiver;
const { webhookMerchant, createEndpoint } = webhookSteps(() => stack);
beforeAll(async () => {
  receiver = await startHttpsReceiver();
  stack = await startStack({ WEBHOOK_ALLOWED_HOSTS: RECEIVER_HOST, WEBHOOK_EXTRA_CA_PATH: receiver.caPath });
});
afterAll(async () => {
  await stack.stop();
  await receiver.close();
});
beforeEach(() => {
  receiver.respond = () => ({ status: 200 });
  delete stack.deps.webhooks!.afterSend;
});

const DAY = 24 * 60 * 60 * 1000;
const path = () => `/hook-${randomString(10)}`;
const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));
const eventIdOf = (r: ReceivedRequest) => r.headers['svc-event-id'] as string;

/** An event committed as a transition commits it, at the stack's clock. */
const stateChange = (merchantId: string, type: 'checkout.session.completed' | 'checkout.session.expired') =>
  stack.db.transaction((trx) =>
    recordEvent(trx, {
      merchantId,
      mode: 'test',
      type,
      object: { id: newId('cs', 'test'), object: 'checkout.session' },
      now: stack.clock(),
    }),
  );

const deliveries = async (key: string, id: string) =>
  (await call(stack.baseUrl, 'GET', `/v1/events/${id}`, { key })).body.deliveries as any[];
const queueRows = (endpointId: string) => stack.db('webhook_queue').where({ endpoint_id: endpointId });
/** How many attempts to the endpoint were delivered (recorded with a 2xx). */
const deliveredTo = async (endpointId: string) =>
  Number(
    (await stack
      .db('event_deliveries')
      .where({ endpoint_id: endpointId })
      .whereBetween('status_code', [200, 299])
      .count({ c: '*' })
      .first())!.c,
  );

it('queues one row per event and endpoint as the dispatcher commits it, and deletes the row with the delivery', async () => {
  const m = await webhookMerchant();
  const p = path();
  const endpoint = await createEndpoint(m.secretKey, receiver.url(p));
  const event = await stateChange(m.merchantId, 'checkout.session.completed');
  await receiver.waitFor(1, p);
  await until(
    () => deliveredTo(endpoint.id),
    (n) => n === 1,
    'the attempt recorded',
  );
  // The attempt is recorded (generation 0, attempt 1) and the queue keeps nothing of it.
  expect(await stack.db('event_deliveries').where({ endpoint_id: endpoint.id })).toEqual([
    expect.objectContaining({ event_id: event.id, generation: 0, attempt_no: 1, status_code: 200 }),
  ]);
  expect(await queueRows(endpoint.id)).toEqual([]);
  const handle = stack.env.client.workflow.getHandle(endpoint.id);
  const described = await handle.describe();
  expect(described.type).toBe(endpointDeliveryWorkflowType);
  // (The static summary is not kept by the time-skipping test server; the dev server shows it.)
  expect(described.typedSearchAttributes.getAll().map((p) => [p.key.name, p.value])).toEqual(
    expect.arrayContaining([
      ['EndpointId', endpoint.id],
      ['MerchantId', m.merchantId],
      ['Mode', 'test'],
      ['EndpointStatus', 'enabled'],
    ]),
  );
  // A new run takes the shorter history bound (continues as new past 1,000 events) and gives one
  // activity every slot: its history marks patches delivery-shorter-runs and delivery-one-batch,
  // which runs from before never saw.
  expect(patchesMarked((await handle.fetchHistory()).events ?? [])).toEqual(
    expect.arrayContaining([patches.deliveryShorterRuns, patches.deliveryOneBatch]),
  );
});

/** The patch ids a history's markers record (`patched()` calls that took the new branch). */
function patchesMarked(events: NonNullable<Awaited<ReturnType<WorkflowHandle['fetchHistory']>>['events']>): string[] {
  return events.flatMap((e) => {
    const data = e.markerRecordedEventAttributes?.details?.['patch-data']?.payloads?.[0]?.data;
    return data ? [JSON.parse(Buffer.from(data).toString('utf8')).id as string] : [];
  });
}

it('sends the same attempt again when a worker dies between the POST and the row update: same event id, one row', async () => {
  const m = await webhookMerchant();
  const p = path();
  let dying = true;
  stack.deps.webhooks!.afterSend = () => {
    if (!dying) return;
    dying = false;
    throw new Error('the worker died after sending'); // nothing recorded, the batch retries
  };
  const endpoint = await createEndpoint(m.secretKey, receiver.url(p));
  const event = await stateChange(m.merchantId, 'checkout.session.completed');
  const [first, again] = await receiver.waitFor(2, p);
  expect([eventIdOf(first), eventIdOf(again)]).toEqual([event.id, event.id]);
  expect(again.body).toBe(first.body);
  const rows = await until(
    () => deliveries(m.secretKey, event.id),
    (d) => d.length >= 1,
    'the recorded attempt',
  );
  expect(rows).toEqual([expect.objectContaining({ endpoint_id: endpoint.id, attempt_no: 1, status_code: 200 })]);
  await sleep(500);
  expect(receiver.requests.filter((r) => r.path === p)).toHaveLength(2);
  expect(await queueRows(endpoint.id)).toEqual([]);
});

it("adopts an old run's pending delivery once: not again once its attempt is recorded", async () => {
  const m = await buildMerchant(stack.db); // no endpoint: the dispatcher queues nothing for its events
  const endpointId = `we_test_adopt${randomString(8)}`;
  const event = await stateChange(m.merchantId, 'checkout.session.completed');
  const key = { eventId: event.id, generation: 0, attemptNo: 2, dueAtMs: Date.now() + DAY };
  // Attempt 2 sent and recorded, its row deleted; then the adoption is retried.
  await stack
    .db('event_deliveries')
    .insert({ event_id: event.id, endpoint_id: endpointId, generation: 0, attempt_no: 2, error: 'http_500' });
  expect(await adopt(stack.db, endpointId, [key])).toBe(0);
  expect(await adopt(stack.db, endpointId, [{ ...key, attemptNo: 3 }])).toBe(1);
  expect(await queueRows(endpointId)).toEqual([expect.objectContaining({ event_id: event.id, attempt_no: 3 })]);
  await stack.db('webhook_queue').where({ endpoint_id: endpointId }).delete();
});

it('takes a row whose event is gone (purged) out of the queue when it claims it, sending nothing', async () => {
  const m = await webhookMerchant();
  const p = path();
  const endpoint = await createEndpoint(m.secretKey, receiver.url(p));
  const gone = newId('evt', 'test'); // an id of now, with no event behind it
  await stack.db('webhook_queue').insert({ event_id: gone, endpoint_id: endpoint.id, generation: 0 });
  const [target] = await wakeTargets(stack.db, [endpoint.id]);
  await wakeEndpoint(stack.env.client, stack.taskQueue, target, 1);
  await until(
    () => queueRows(endpoint.id),
    (rows) => rows.length === 0,
    'the row taken out',
  );
  expect(receiver.requests.filter((r) => r.path === p)).toEqual([]);
  expect(await stack.db('event_deliveries').where({ endpoint_id: endpoint.id })).toEqual([]);
});

describe('replay of a time window', () => {
  const replay = (key: string, endpointId: string, body: unknown, idempotencyKey?: string) =>
    call(stack.baseUrl, 'POST', `/v1/webhook_endpoints/${endpointId}/replay`, { key, idempotencyKey, body });

  it('queues every event of the window the endpoint subscribes to as new deliveries, once per Idempotency-Key', async () => {
    const m = await webhookMerchant();
    const p = path();
    const before = await stateChange(m.merchantId, 'checkout.session.completed');
    await sleep(20);
    const since = stack.clock();
    const inside = [
      await stateChange(m.merchantId, 'checkout.session.completed'),
      await stateChange(m.merchantId, 'checkout.session.expired'),
      await stateChange(m.merchantId, 'checkout.session.completed'),
    ];
    await sleep(20);
    const until_ = stack.clock();
    await stateChange(m.merchantId, 'checkout.session.completed');
    // Every event is fanned out (to no endpoint yet) before the endpoint exists: only the replay sends them.
    await until(
      () => stack.db('events').where({ merchant_id: m.merchantId }).whereNull('dispatched_at'),
      (rows) => rows.length === 0,
      'the dispatcher to pass the events',
    );
    const endpoint = await createEndpoint(m.secretKey, receiver.url(p), { events: ['checkout.session.completed'] });
    const body = { since: since.toISOString(), until: until_.toISOString() };
    const key = `replay_${randomString(12)}`;

    const res = await replay(m.secretKey, endpoint.id, body, key);
    expect(res.status).toBe(202);
    expect(res.body).toEqual({
      id: expect.stringMatching(/^wr_/),
      object: 'webhook_replay',
      endpoint_id: endpoint.id,
      since: body.since,
      until: body.until,
      types: null,
      queued: 2,
      created_at: expect.any(String),
    });
    const got = await receiver.waitFor(2, p);
    expect(got.map(eventIdOf).sort()).toEqual([inside[0].id, inside[2].id].sort());
    for (const id of [inside[0].id, inside[2].id]) {
      const rows = await until(
        () => deliveries(m.secretKey, id),
        (d) => d.length === 1,
        'the replayed delivery',
      );
      expect(rows[0]).toMatchObject({ endpoint_id: endpoint.id, attempt_no: 1, status_code: 200 });
    }

    const again = await replay(m.secretKey, endpoint.id, body, key);
    expect([again.status, again.headers.get('idempotent-replayed'), again.body]).toEqual([202, 'true', res.body]);
    const typed = await replay(m.secretKey, endpoint.id, { ...body, types: ['checkout.session.expired'] }, `t_${key}`);
    expect(typed.body.queued).toBe(0); // the endpoint does not subscribe to it
    await sleep(700);
    expect(receiver.requests.filter((r) => r.path === p)).toHaveLength(2);
    expect(receiver.requests.some((r) => eventIdOf(r) === before.id && r.path === p)).toBe(false);
  });

  it('requires an Idempotency-Key and refuses a window over 30 days, beyond retention, reversed, or on a disabled endpoint', async () => {
    const m = await webhookMerchant();
    const endpoint = await createEndpoint(m.secretKey, receiver.url(path()));
    const now = stack.clock().getTime();
    const at = (ms: number) => new Date(now + ms).toISOString();
    const missing = await replay(m.secretKey, endpoint.id, { since: at(-DAY), until: at(0) });
    expect([missing.status, missing.body.error.code]).toEqual([400, 'idempotency_key_required']);
    for (const [body, field, issue] of [
      [{ since: at(-31 * DAY), until: at(0) }, 'until', 'window_too_long'],
      [{ since: at(-31 * DAY), until: at(-30.5 * DAY) }, 'since', 'beyond_retention'],
      [{ since: at(0), until: at(-DAY) }, 'until', 'not_after_since'],
    ] as const) {
      const res = await replay(m.secretKey, endpoint.id, body, `k_${randomString(12)}`);
      expect([res.status, res.body.error.code, res.body.error.details]).toEqual([
        400,
        'validation_error',
        [{ field, issue }],
      ]);
    }
    await call(stack.baseUrl, 'PATCH', `/v1/webhook_endpoints/${endpoint.id}`, {
      key: m.secretKey,
      body: { status: 'disabled' },
    });
    const disabled = await replay(m.secretKey, endpoint.id, { since: at(-DAY), until: at(0) }, `k_${randomString(12)}`);
    expect([disabled.status, disabled.body.error.code]).toEqual([409, 'endpoint_disabled']);
    const other = await buildMerchant(stack.db);
    const foreign = await replay(
      other.secretKey,
      endpoint.id,
      { since: at(-DAY), until: at(0) },
      `k_${randomString(12)}`,
    );
    expect([foreign.status, foreign.body.error.code]).toEqual([404, 'endpoint_not_found']);
  });
});

it('keeps thousands of pending deliveries in Postgres across several continue-as-new runs and delivers each once', async () => {
  const m = await buildMerchant(stack.db); // not dispatched: the rows are queued below
  const p = path();
  const seen = new Map<string, number>();
  receiver.respond = (r) => {
    if (r.path !== p) return { status: 200 };
    const id = eventIdOf(r);
    seen.set(id, (seen.get(id) ?? 0) + 1);
    return { status: seen.get(id) === 1 ? 503 : 200 }; // the first attempt fails, the retries succeed
  };
  const endpoint = await createEndpoint(m.secretKey, receiver.url(p));
  const count = 1500;
  const ids = Array.from({ length: count }, () => newId('evt', 'test'));
  await stack.db.batchInsert(
    'events',
    ids.map((id) => ({
      id,
      merchant_id: m.merchantId,
      mode: 'test',
      type: 'checkout.session.completed',
      data_object: JSON.stringify({ id: 'cs_test_bulk', object: 'checkout.session' }),
      created_at: stack.clock(),
      dispatched_at: stack.clock(),
    })),
    500,
  );
  await enqueue(
    stack.db,
    ids.map((eventId) => ({ eventId, endpointId: endpoint.id })),
    0,
  );
  // Started as the dispatcher would, with a low history limit so that it continues as new often.
  const [target] = await wakeTargets(stack.db, [endpoint.id]);
  const handle = await stack.env.client.workflow.start(endpointDeliveryWorkflowType, {
    workflowId: endpoint.id,
    taskQueue: stack.taskQueue,
    args: [{ endpointId: endpoint.id, merchantId: m.merchantId, mode: 'test', historyLimit: 20 }],
  });
  await wakeEndpoint(stack.env.client, stack.taskQueue, target, count);
  const attempts = (n: number) =>
    stack.db('event_deliveries').where({ endpoint_id: endpoint.id, attempt_no: n }).count({ c: '*' }).first();
  await until(
    () => attempts(1),
    (r) => Number(r!.c) === count,
    'every first attempt',
    90_000,
  );
  await stack.env.sleep('2 minutes');
  const delivered = () => deliveredTo(endpoint.id);
  await until(delivered, (n) => n === count, 'every retry delivered', 90_000).catch(async () => {
    await stack.env.sleep('6 minutes'); // a retry that timed out on a loaded machine: its next attempt, 5 minutes on
    await until(delivered, (n) => n === count, 'every retry delivered', 90_000);
  });
  await sleep(500);
  const rows = await stack.db('event_deliveries').where({ endpoint_id: endpoint.id });
  expect(rows.filter((r) => r.attempt_no === 1).map((r) => r.status_code)).toEqual(Array(count).fill(503));
  expect(rows.filter((r) => r.status_code === 200)).toHaveLength(count);
  // Every POST the receiver saw is one recorded attempt: nothing sent twice, nothing lost.
  expect(seen.size).toBe(count);
  expect([...seen.values()].reduce((a, b) => a + b, 0)).toBe(rows.length);
  expect(await queueRows(endpoint.id)).toEqual([]);
  expect(await runsOf(endpoint.id)).toBeGreaterThan(2);
  expect((await handle.describe()).runId).not.toBe(handle.firstExecutionRunId);
  await keepHistory(stack, endpoint.id, 'delivery/queue-continue-as-new', { firstRuns: 2 });
}, 240_000);

/** How many runs the workflow has had (continue-as-new chain), counted from the current one back. */
async function runsOf(workflowId: string): Promise<number> {
  let runs = 0;
  let runId: string | undefined;
  for (;;) {
    const history = await stack.env.client.workflow.getHandle(workflowId, runId).fetchHistory();
    runs++;
    runId = history.events?.[0]?.workflowExecutionStartedEventAttributes?.continuedExecutionRunId ?? undefined;
    if (!runId) return runs;
  }
}

it('moves an old deliveryWorkflow run’s queue into Postgres, where it continues as an endpointDeliveryWorkflow', async () => {
  const m = await buildMerchant(stack.db);
  const p = path();
  const endpoint = await createEndpoint(m.secretKey, receiver.url(p));
  const events = [
    await stateChange(m.merchantId, 'checkout.session.completed'),
    await stateChange(m.merchantId, 'checkout.session.completed'),
  ];
  // As the previous release's dispatcher started it: the events in the signal, the queue in the workflow.
  await stack.env.client.workflow.signalWithStart(deliveryWorkflowType, {
    workflowId: endpoint.id,
    taskQueue: stack.taskQueue,
    args: [{ endpointId: endpoint.id }],
    signal: 'deliver',
    signalArgs: [{ eventIds: events.map((e) => e.id), generation: 0 }],
  });
  const got = await receiver.waitFor(2, p);
  expect(got.map(eventIdOf).sort()).toEqual(events.map((e) => e.id).sort());
  await until(
    () => deliveredTo(endpoint.id),
    (n) => n === 2,
    'the adopted rows delivered',
  );
  expect(await queueRows(endpoint.id)).toEqual([]);
  expect((await stack.env.client.workflow.getHandle(endpoint.id).describe()).type).toBe(endpointDeliveryWorkflowType);
  await keepHistory(stack, endpoint.id, 'delivery/old-type-moves-to-postgres', { firstRuns: 1 });
});

it('ends an idle run within a day (nothing pending, no failures), and the next event starts another', async () => {
  const m = await webhookMerchant();
  const p = path();
  const endpoint = await createEndpoint(m.secretKey, receiver.url(p));
  await stateChange(m.merchantId, 'checkout.session.completed');
  await receiver.waitFor(1, p);
  const handle = stack.env.client.workflow.getHandle(endpoint.id);
  const { runId } = await handle.describe();
  await stack.env.sleep('2 hours');
  await until(
    async () => (await handle.describe()).status.name,
    (s) => s === 'COMPLETED',
    'the idle run’s end',
  );
  await keepHistory(stack, endpoint.id, 'delivery/idle-run-ends');
  await stateChange(m.merchantId, 'checkout.session.completed');
  await receiver.waitFor(2, p);
  expect((await handle.describe()).runId).not.toBe(runId);
});

it('never has more POSTs in flight to an endpoint than its max_in_flight (set with the ops CLI)', async () => {
  const m = await webhookMerchant();
  const p = path();
  receiver.respond = (r) => (r.path === p ? { status: 200, delayMs: 300 } : { status: 200 });
  const endpoint = await createEndpoint(m.secretKey, receiver.url(p));
  const ops = async (...argv: string[]) => {
    const result = await run([...argv, '--json'], { db: stack.db, settings: stack.settings });
    return { exitCode: result.exitCode, doc: JSON.parse(result.stdout) };
  };
  const set = ['webhook-endpoint', 'set-concurrency', '--endpoint', endpoint.id, '--max-in-flight'];
  expect(await ops(...set, '0')).toEqual({
    exitCode: 1,
    doc: { error: { code: 'invalid_max_in_flight', message: 'max-in-flight must be between 1 and 200' } },
  });
  expect(await ops(...set, '2')).toMatchObject({
    exitCode: 0,
    doc: { endpoint: { id: endpoint.id, max_in_flight: 2 } },
  });
  for (let i = 0; i < 8; i++) await stateChange(m.merchantId, 'checkout.session.completed');
  const got = await receiver.waitFor(8, p, 30_000);
  const starts = got.map((r) => r.at).sort((a, b) => a - b);
  const overlapping = Math.max(...starts.map((t) => starts.filter((s) => s <= t && s + 300 > t).length));
  expect(overlapping).toBeLessThanOrEqual(2);
  expect(overlapping).toBe(2);
});

it('gives one deliverDue every slot of its endpoint: one batch at a time, its limit the max_in_flight (patch delivery-one-batch)', async () => {
  const m = await webhookMerchant();
  const p = path();
  receiver.respond = (r) => (r.path === p ? { status: 200, delayMs: 200 } : { status: 200 });
  const endpoint = await createEndpoint(m.secretKey, receiver.url(p));
  await setEndpointConcurrency(stack.db, endpoint.id, 15);
  await Promise.all(Array.from({ length: 30 }, () => stateChange(m.merchantId, 'checkout.session.completed')));
  await receiver.waitFor(30, p, 30_000);
  const handle = stack.env.client.workflow.getHandle(endpoint.id);
  const events = (await handle.fetchHistory()).events ?? [];
  expect(patchesMarked(events)).toContain(patches.deliveryOneBatch);
  // Each deliverDue's limit, and the most running at once (scheduled and not yet closed).
  const limits: number[] = [];
  const open = new Set<string>();
  let most = 0;
  for (const e of events) {
    const scheduled = e.activityTaskScheduledEventAttributes;
    if (scheduled?.activityType?.name === 'deliverDue') {
      const data = scheduled.input?.payloads?.[0]?.data;
      limits.push((JSON.parse(Buffer.from(data!).toString()) as { limit: number }).limit);
      open.add(String(e.eventId));
      most = Math.max(most, open.size);
    }
    const closed =
      e.activityTaskCompletedEventAttributes ??
      e.activityTaskFailedEventAttributes ??
      e.activityTaskTimedOutEventAttributes ??
      e.activityTaskCanceledEventAttributes;
    if (closed) open.delete(String(closed.scheduledEventId));
  }
  expect(limits.length).toBeGreaterThan(0);
  expect(new Set(limits)).toEqual(new Set([15]));
  expect(most).toBe(1);
});

it('follows a busy deliverDue (5 or more attempts) with another at once, so the next events need no wake', async () => {
  const m = await webhookMerchant();
  const p = path();
  const endpoint = await createEndpoint(m.secretKey, receiver.url(p));
  await setEndpointConcurrency(stack.db, endpoint.id, 10); // one deliverDue at a time: it takes all six
  await Promise.all(Array.from({ length: 6 }, () => stateChange(m.merchantId, 'checkout.session.completed')));
  await receiver.waitFor(6, p);
  const handle = stack.env.client.workflow.getHandle(endpoint.id);
  type HistoryEvent = NonNullable<Awaited<ReturnType<typeof handle.fetchHistory>>['events']>[number];
  const deliverDue = (e: HistoryEvent) => e.activityTaskScheduledEventAttributes?.activityType?.name === 'deliverDue';
  const attempted = (e: HistoryEvent) => {
    const data = e.activityTaskCompletedEventAttributes?.result?.payloads?.[0]?.data;
    return data ? (JSON.parse(Buffer.from(data).toString()) as { attempted: number }).attempted : -1;
  };
  /** The first deliverDue that attempted 5 or more, and the next deliverDue scheduled after it. */
  const busyAndNext = (events: HistoryEvent[]) => {
    const busy = events.findIndex((e) => attempted(e) >= 5);
    return { busy, next: busy < 0 ? -1 : events.findIndex((e, i) => i > busy && deliverDue(e)) };
  };
  const events = await until(
    async () => (await handle.fetchHistory()).events ?? [],
    (h) => busyAndNext(h).next > 0,
    'a busy deliverDue and the next one',
  );
  expect(patchesMarked(events)).toContain(patches.deliveryKeepWatchingBusyEndpoint);
  // The next one is scheduled in the workflow task that handled the busy one's result: no wake between.
  const { busy, next } = busyAndNext(events);
  expect(events.slice(busy, next).filter((e) => e.workflowTaskCompletedEventAttributes)).toHaveLength(1);
  await keepHistory(stack, endpoint.id, 'delivery/busy-endpoint-keeps-watching');
});

it('moves the 3-day failure clock as if attempts made at different moments were recorded in time order', async () => {
  // Not dispatched (buildMerchant, not webhookMerchant): only this test records attempts for the endpoint.
  const m = await buildMerchant(stack.db);
  const endpoint = await createEndpoint(m.secretKey, receiver.url(path()));
  const events = await Promise.all([0, 1, 2].map(() => stateChange(m.merchantId, 'checkout.session.completed')));
  const t0 = stack.clock().getTime();
  const made = (i: number, attemptNo: number, ok: boolean, atMs: number) => ({
    eventId: events[i].id,
    generation: 0,
    attemptNo,
    event: { merchant_id: m.merchantId, mode: 'test' as const },
    statusCode: ok ? 200 : 500,
    error: ok ? null : 'http_500',
    attempted: true,
    atMs,
  });
  const clock = () =>
    stack.db('webhook_endpoints').where({ id: endpoint.id }).first('failing_since', 'last_success_at');

  // One batch, out of order: a success, then failures after it; the clock starts at the first of those.
  await recordAttempts(
    stack.db,
    endpoint.id,
    [made(1, 1, false, t0 + 3000), made(0, 1, true, t0 + 1000), made(2, 1, false, t0 + 2000)],
    t0,
  );
  expect(await clock()).toEqual({ failing_since: new Date(t0 + 2000), last_success_at: new Date(t0 + 1000) });

  // A later success stops it, even beside an earlier failure in the same batch.
  await recordAttempts(stack.db, endpoint.id, [made(2, 2, true, t0 + 5000), made(1, 2, false, t0 + 4000)], t0);
  expect(await clock()).toEqual({ failing_since: null, last_success_at: new Date(t0 + 5000) });

  // A failure older than the last recorded success does not start it.
  await recordAttempts(stack.db, endpoint.id, [made(1, 3, false, t0 + 4500)], t0);
  expect(await clock()).toEqual({ failing_since: null, last_success_at: new Date(t0 + 5000) });
  const rows = await stack
    .db('event_deliveries')
    .where({ endpoint_id: endpoint.id, event_id: events[1].id })
    .orderBy('attempt_no');
  expect(rows.map((r) => [r.attempt_no, r.delivered_at.getTime()])).toEqual([
    [1, t0 + 3000],
    [2, t0 + 4000],
    [3, t0 + 4500],
  ]);
});

import { Worker } from '@temporalio/worker';
import { WorkflowFailedError } from '@temporalio/client';
import { createDeliveryActivities } from '../../activities/delivery';
import { recordEvent } from '../../src/checkout/events';
import { captureLogs } from '../../src/lib/log';
import { newId, randomString } from '../../src/lib/ids';
import { outboxSms } from '../../src/checkout/public/sms';
import { startOutboxRelay, type OutboxRelay, type OutboxRelayDeps } from '../../src/messaging/relay';
import type { MessageTransport, OutboxMessage } from '../../src/messaging/transports';
import { startHandoffRelay, type HandoffRelay } from '../../src/temporal/handoff-relay';
import { recordHandoff } from '../../src/temporal/handoffs';
import { wakeTargets } from '../../src/webhooks/route-and-wake';
import { registry } from '../../src/telemetry/metrics';
import type { FenceSite } from '../../src/telemetry/fencing';
import { buildMerchant } from '../helpers/factories';
import { HttpsReceiver, RECEIVER_HOST, ReceivedRequest, startHttpsReceiver } from '../helpers/https-receiver';
import { startStack, Stack, testClock } from '../helpers/stack';
import { until, webhookSteps } from '../helpers/webhooks';

/**
 * Fencing (docs/architecture.md "Fencing"): a process paused while it holds a claim, a lease or a
 * running activity resumes after another took the work over, and nothing it writes then takes
 * effect; each refused write counts in `svc_claims_fenced_total{site}` and logs a warn line. The
 * pause is a gate the test holds at the point a frozen process would stop (after the POST, after
 * the claim, after the delivery, inside a blocked statement); the lapse is the lease's end moved
 * into the past, or a second claimant whose clock is ahead. Real Postgres, a real HTTPS receiver
 * and the stack's Temporal server; the SMS provider is a transport that records what it is handed.
 */
let stack: Stack;
let receiver: HttpsReceiver;
const { createEndpoint } = webhookSteps(() => stack);
const logged: Array<Record<string, unknown>> = [];
let restoreLogs: () => void;
beforeAll(async () => {
  receiver = await startHttpsReceiver();
  stack = await startStack({ WEBHOOK_ALLOWED_HOSTS: RECEIVER_HOST, WEBHOOK_EXTRA_CA_PATH: receiver.caPath });
  restoreLogs = captureLogs({ write: (line: string) => void logged.push(JSON.parse(line)) }, 'warn');
});
afterAll(async () => {
  restoreLogs();
  await stack.stop();
  await receiver.close();
});
beforeEach(() => {
  receiver.respond = () => ({ status: 200 });
});

/** A point where a test holds a process as a pause would (`open` lets it go on). */
function gate() {
  let open!: () => void;
  const opened = new Promise<void>((resolve) => (open = resolve));
  return { opened, open };
}

/** The counter's value at `site`. */
async function fencedAt(site: FenceSite): Promise<number> {
  const metric = registry.getSingleMetric('svc_claims_fenced_total');
  const values = (await metric!.get()).values;
  return values.find((v) => v.labels.site === site)?.value ?? 0;
}

/** The warn lines the fence logged at `site`. */
const fenceLines = (site: FenceSite) =>
  logged.filter((l) => l.msg === 'stale claim fenced: the write was not made' && l.site === site);

// ---- the webhook queue and the endpoint's failure clock ------------------------------------------

/**
 * A merchant whose events no dispatcher of this stack fans out, its endpoint, one event and that
 * event's queue row (attempt 1, due now): only the batches the test runs touch it.
 */
async function queuedDelivery() {
  const contactEmail = `ops-${randomString(8).toLowerCase()}@shop.example.com`;
  const m = { ...(await buildMerchant(stack.db, { contactEmail })), contactEmail };
  const path = `/hook-${randomString(10)}`;
  const endpoint = await createEndpoint(m.secretKey, receiver.url(path));
  const event = await stack.db.transaction((trx) =>
    recordEvent(trx, {
      merchantId: m.merchantId,
      mode: 'test',
      type: 'checkout.session.completed',
      object: { id: newId('cs', 'test'), object: 'checkout.session' },
      now: stack.clock(),
    }),
  );
  await stack.db('webhook_queue').insert({ event_id: event.id, endpoint_id: endpoint.id, generation: 0 });
  return { m, path, endpoint, event };
}

/** Delivery activities whose every POST, once answered, waits for `paused` (a worker frozen before recording). */
const deliveryPausedAfterPost = (paused: Promise<void>) =>
  createDeliveryActivities({
    db: stack.db,
    clock: stack.clock,
    webhooks: { ...stack.deps.webhooks!, afterSend: () => paused },
  });

/** The claim's lease ends (as two minutes passing would end it). */
const leaseLapses = (endpointId: string) =>
  stack
    .db('webhook_queue')
    .where({ endpoint_id: endpointId })
    .update({ next_attempt_at: stack.db.raw(`now() - interval '1 second'`) });

const eventIdOf = (r: ReceivedRequest) => r.headers['svc-event-id'];

/** What the endpoint's attempts, failure clock and undelivered list hold. */
async function endpointRecord(endpointId: string) {
  const endpoint = await stack.db('webhook_endpoints').where({ id: endpointId }).first();
  return {
    attempts: await stack
      .db('event_deliveries')
      .where({ endpoint_id: endpointId })
      .select('event_id', 'attempt_no', 'status_code', 'error'),
    failingSince: endpoint.failing_since,
    lastError: endpoint.last_error,
    undelivered: await stack.db('webhook_undelivered').where({ endpoint_id: endpointId }).select('event_id'),
  };
}

describe('the webhook queue', () => {
  it('a batch resumed after its lease lapsed and another batch took the row records nothing: no attempt, no failure clock', async () => {
    const { path, endpoint, event } = await queuedDelivery();
    let replies = 0;
    receiver.respond = (r) => ({ status: r.path === path && ++replies === 1 ? 500 : 200 });
    const before = await fencedAt('webhook_queue');

    // Batch A sends (the endpoint answers 500) and freezes before recording.
    const pausedA = gate();
    const a = deliveryPausedAfterPost(pausedA.opened).deliverDue({
      endpointId: endpoint.id,
      batch: `runA:1`,
      nowMs: Date.now(),
      limit: 5,
    });
    await receiver.waitFor(1, path);
    // Its lease lapses; batch B claims the row, sends (200) and freezes before recording.
    await leaseLapses(endpoint.id);
    const pausedB = gate();
    const b = deliveryPausedAfterPost(pausedB.opened).deliverDue({
      endpointId: endpoint.id,
      batch: `runB:1`,
      nowMs: Date.now(),
      limit: 5,
    });
    await receiver.waitFor(2, path);

    // A resumes first: its 500 would start the failure clock and list the event undelivered.
    pausedA.open();
    expect(await a).toEqual(expect.objectContaining({ attempted: 0, delivered: 0, failed: 0 }));
    expect(await endpointRecord(endpoint.id)).toEqual({
      attempts: [],
      failingSince: null,
      lastError: null,
      undelivered: [],
    });
    expect(await stack.db('webhook_queue').where({ endpoint_id: endpoint.id }).select('claim')).toEqual([
      { claim: 'runB:1' },
    ]);
    expect(await fencedAt('webhook_queue')).toBe(before + 1);
    expect(fenceLines('webhook_queue').at(-1)).toEqual(
      expect.objectContaining({
        level: 'warn',
        write: 'recording',
        endpoint_id: endpoint.id,
        batch: 'runA:1',
        event_ids: [event.id],
        fenced: 1,
      }),
    );

    // B, whose claim it is, records its 200; the event went out twice under one id, byte for byte.
    pausedB.open();
    expect(await b).toEqual(expect.objectContaining({ attempted: 1, delivered: 1 }));
    expect((await endpointRecord(endpoint.id)).attempts).toEqual([
      { event_id: event.id, attempt_no: 1, status_code: 200, error: null },
    ]);
    expect(await stack.db('webhook_queue').where({ endpoint_id: endpoint.id })).toEqual([]);
    const [first, second] = receiver.requests.filter((r) => r.path === path);
    expect([eventIdOf(first), eventIdOf(second)]).toEqual([event.id, event.id]);
    expect(second.body).toBe(first.body);
    expect(await fencedAt('webhook_queue')).toBe(before + 1);
  });

  it('a batch resumed after its own retry took its rows back (same batch, a new lease) records nothing', async () => {
    const { path, endpoint, event } = await queuedDelivery();
    let replies = 0;
    receiver.respond = (r) => ({ status: r.path === path && ++replies === 1 ? 500 : 200 });
    const before = await fencedAt('webhook_queue');
    const batch = `run${randomString(6)}:1`;

    const paused = gate();
    const first = deliveryPausedAfterPost(paused.opened).deliverDue({
      endpointId: endpoint.id,
      batch,
      nowMs: Date.now(),
      limit: 5,
    });
    await receiver.waitFor(1, path);
    const leaseOfFirst = (await stack.db('webhook_queue').where({ endpoint_id: endpoint.id }).first()).next_attempt_at;
    // The activity timed out and its retry (the same batch) takes back what the batch holds, with
    // a lease of its own, sends it and freezes too.
    const pausedRetry = gate();
    const retry = deliveryPausedAfterPost(pausedRetry.opened).deliverDue({
      endpointId: endpoint.id,
      batch,
      nowMs: Date.now() + 61_000,
      limit: 5,
    });
    await receiver.waitFor(2, path);
    const row = await stack.db('webhook_queue').where({ endpoint_id: endpoint.id }).first();
    expect(row.claim).toBe(batch); // the claim alone cannot tell the two apart: the lease end does
    expect(row.next_attempt_at.getTime()).toBeGreaterThan(leaseOfFirst.getTime());

    paused.open();
    expect(await first).toEqual(expect.objectContaining({ attempted: 0 }));
    expect(await endpointRecord(endpoint.id)).toEqual({
      attempts: [],
      failingSince: null,
      lastError: null,
      undelivered: [],
    });
    expect(await fencedAt('webhook_queue')).toBe(before + 1);

    pausedRetry.open();
    expect(await retry).toEqual(expect.objectContaining({ attempted: 1, delivered: 1 }));
    expect((await endpointRecord(endpoint.id)).attempts).toEqual([
      { event_id: event.id, attempt_no: 1, status_code: 200, error: null },
    ]);
  });

  it('the 3-day disable, its activity held past its start-to-close timeout, disables nothing and e-mails no one', async () => {
    const { m, endpoint } = await queuedDelivery();
    await stack
      .db('webhook_endpoints')
      .where({ id: endpoint.id })
      .update({ failing_since: stack.db.raw(`now() - interval '4 days'`), last_error: 'http_500' });
    const failingSince = (await stack.db('webhook_endpoints').where({ id: endpoint.id }).first()).failing_since;
    const before = await fencedAt('endpoint_failure_clock');

    const taskQueue = `fencing-${randomString(8)}`;
    const worker = await Worker.create({
      connection: stack.env.nativeConnection,
      namespace: stack.env.namespace ?? 'default',
      taskQueue,
      workflowsPath: require.resolve('../helpers/fence-workflows'),
      activities: createDeliveryActivities({ db: stack.db, clock: stack.clock, webhooks: stack.deps.webhooks! }),
      maxCachedWorkflows: 0,
    });
    const running = worker.run();
    // The endpoint's row is locked: the activity's UPDATE waits (a stalled process) past its 3 s.
    const lock = await stack.db.transaction();
    try {
      await lock.raw('SELECT 1 FROM webhook_endpoints WHERE id = ? FOR UPDATE', [endpoint.id]);
      const handle = await stack.env.client.workflow.start('disableWithinDeadline', {
        taskQueue,
        workflowId: `fencing-disable-${randomString(8)}`,
        args: [{ endpointId: endpoint.id, nowMs: Date.now(), timeoutMs: 3000 }],
      });
      await until(
        async () =>
          (
            await stack.db.raw(
              `SELECT count(*)::int AS n FROM pg_stat_activity
                WHERE wait_event_type = 'Lock' AND query ILIKE 'update "webhook_endpoints"%' AND query ILIKE '%"disabled_reason"%'`,
            )
          ).rows[0].n as number,
        (n) => n > 0,
        'the activity waiting on the lock',
      );
      await new Promise((r) => setTimeout(r, 3200));
      await lock.commit();
      await until(
        () => fencedAt('endpoint_failure_clock'),
        (n) => n === before + 1,
        'the write fenced',
      );
      const row = await stack.db('webhook_endpoints').where({ id: endpoint.id }).first();
      expect({ status: row.status, failingSince: row.failing_since }).toEqual({ status: 'enabled', failingSince });
      expect(await stack.db('outbox').where({ to: m.contactEmail })).toEqual([]);
      expect(fenceLines('endpoint_failure_clock').at(-1)).toEqual(
        expect.objectContaining({ write: 'activity', activity: 'disable', endpoint_id: endpoint.id }),
      );
      await expect(handle.result()).rejects.toBeInstanceOf(WorkflowFailedError);
    } finally {
      if (!lock.isCompleted()) await lock.commit();
      worker.shutdown();
      await running;
    }
  });
});

// ---- the outbox relay ----------------------------------------------------------------------------

describe('the outbox relay', () => {
  const relays: OutboxRelay[] = [];
  afterEach(async () => {
    await Promise.all(relays.splice(0).map((r) => r.stop()));
  });

  /** The SMS provider as the relay sees it: every message handed to it. */
  const sent: Array<{ id: number; to: string }> = [];
  const smsTransport: MessageTransport = {
    describe: 'test sms',
    async send(message: OutboxMessage) {
      sent.push({ id: message.id, to: message.to });
    },
  };
  const sentTo = (to: string) => sent.filter((s) => s.to === to);
  const phone = () => `+9647${String(Date.now() % 1e6).padStart(6, '0')}${randomString(3).replace(/\D/g, '1')}`;

  function relay(deps: Partial<OutboxRelayDeps> & Pick<OutboxRelayDeps, 'onlyTo'>): OutboxRelay {
    const r = startOutboxRelay({ db: stack.db, transports: { sms: smsTransport }, pollEveryMs: 60_000, ...deps });
    relays.push(r);
    return r;
  }

  it('a sender frozen between its claim and its send, resumed after its lease ended, sends nothing: one SMS', async () => {
    const to = phone();
    const clock = testClock();
    const before = await fencedAt('outbox');
    const frozen = gate();
    let claimed = false;
    const a = relay({
      onlyTo: new Set([to]),
      now: clock,
      beforeSend: async () => {
        claimed = true;
        await frozen.opened;
      },
    });
    await a.ready;
    await outboxSms(stack.db).send({ to, body: 'Your verification code is 111222' });
    await until(async () => claimed, Boolean, 'relay A to claim');
    // Its lease (30 s) ends; relay B takes the row and sends it.
    clock.advance(30_001);
    const b = relay({ onlyTo: new Set([to]), now: clock });
    await b.drain();
    expect(sentTo(to)).toHaveLength(1);
    const [row] = await stack.db('outbox').where({ to });
    expect(row.attempts).toBe(2);
    expect(row.sent_at).not.toBeNull();

    frozen.open();
    await until(
      () => fencedAt('outbox'),
      (n) => n === before + 1,
      'the send fenced',
    );
    expect(sentTo(to)).toHaveLength(1);
    expect(fenceLines('outbox').at(-1)).toEqual(
      expect.objectContaining({ write: 'send', id: row.id, kind: 'sms', attempts: 1 }),
    );
    expect(JSON.stringify(fenceLines('outbox'))).not.toContain('111222');
  });

  it('a sender whose row another relay took (its clock ahead) sends nothing, though its own lease has not ended', async () => {
    const to = phone();
    const clock = testClock();
    const before = await fencedAt('outbox');
    const frozen = gate();
    let claimed = false;
    const a = relay({
      onlyTo: new Set([to]),
      now: clock,
      beforeSend: async () => {
        claimed = true;
        await frozen.opened;
      },
    });
    await a.ready;
    await outboxSms(stack.db).send({ to, body: 'Your verification code is 333444' });
    await until(async () => claimed, Boolean, 'relay A to claim');
    const ahead = () => new Date(clock().getTime() + 31_000);
    await relay({ onlyTo: new Set([to]), now: ahead }).drain();
    expect(sentTo(to)).toHaveLength(1);

    frozen.open();
    await until(
      () => fencedAt('outbox'),
      (n) => n === before + 1,
      'the send fenced',
    );
    expect(sentTo(to)).toHaveLength(1);
    expect((await stack.db('outbox').where({ to }).first()).attempts).toBe(2);
  });

  it('a sender frozen after its send does not mark the row another relay took: the new holder marks it', async () => {
    const to = phone();
    const clock = testClock();
    const before = await fencedAt('outbox');
    const frozen = gate();
    let sentByA = false;
    const slowTransport: MessageTransport = {
      describe: 'slow sms',
      async send(message) {
        await smsTransport.send(message);
        sentByA = true;
        await frozen.opened; // frozen after the provider took it, before the mark
      },
    };
    const a = relay({ onlyTo: new Set([to]), now: clock, transports: { sms: slowTransport } });
    await a.ready;
    await outboxSms(stack.db).send({ to, body: 'Your verification code is 555666' });
    await until(async () => sentByA, Boolean, 'relay A to send');
    const ahead = () => new Date(clock().getTime() + 31_000);
    // Relay B (its clock ahead) takes the row and freezes before sending: the row is B's, unsent.
    const frozenB = gate();
    let claimedByB = false;
    const b = relay({
      onlyTo: new Set([to]),
      now: ahead,
      beforeSend: async () => {
        claimedByB = true;
        await frozenB.opened;
      },
    });
    void b.drain();
    await until(async () => claimedByB, Boolean, 'relay B to claim');

    frozen.open(); // A's sent mark would end B's claim and mask a row B has not sent
    await until(
      () => fencedAt('outbox'),
      (n) => n === before + 1,
      'the sent mark fenced',
    );
    const row = await stack.db('outbox').where({ to }).first();
    expect({ attempts: row.attempts, sentAt: row.sent_at }).toEqual({ attempts: 2, sentAt: null });
    expect(fenceLines('outbox').at(-1)).toEqual(expect.objectContaining({ write: 'sent mark', attempts: 1 }));

    frozenB.open();
    await until(
      async () => (await stack.db('outbox').where({ to }).first()).sent_at,
      (s) => s !== null,
      'relay B to mark it sent',
    );
    expect(sentTo(to)).toHaveLength(2); // A's send was already out: at least once, never a third
  });
});

// ---- the handoff relay ---------------------------------------------------------------------------

describe('the handoff relay', () => {
  it('a relay frozen after its delivery does not delete the row another relay took over', async () => {
    const m = await buildMerchant(stack.db);
    const path = `/hook-${randomString(10)}`;
    const endpoint = await createEndpoint(m.secretKey, receiver.url(path));
    const [target] = await wakeTargets(stack.db, [endpoint.id]);
    const { id } = await stack.db.transaction((trx) =>
      recordHandoff(trx, { merchantId: m.merchantId, mode: 'test' }, { kind: 'endpoint_wake', endpoint: target }),
    );
    // Due at once (the API that wrote it is gone).
    await stack
      .db('workflow_handoffs')
      .where({ id })
      .update({ next_attempt_at: stack.db.raw('now()') });
    const before = await fencedAt('handoff_relay');
    const relays: HandoffRelay[] = [];
    const frozenRelay = (frozen: Promise<void>, onDelivered: () => void) => {
      const r = startHandoffRelay({
        db: stack.db,
        temporal: stack.env.client,
        taskQueue: stack.taskQueue,
        merchantIds: new Set([m.merchantId]),
        pollEveryMs: 100,
        afterDeliver: async () => {
          onDelivered();
          await frozen;
        },
      });
      relays.push(r);
      return r;
    };
    try {
      const frozenA = gate();
      let deliveredByA = false;
      frozenRelay(frozenA.opened, () => (deliveredByA = true));
      await until(async () => deliveredByA, Boolean, 'relay A to deliver');
      // Its lease ends; relay B takes the row over, delivers it again and freezes too.
      await stack
        .db('workflow_handoffs')
        .where({ id })
        .update({ next_attempt_at: stack.db.raw(`now() - interval '1 second'`) });
      const frozenB = gate();
      let deliveredByB = false;
      frozenRelay(frozenB.opened, () => (deliveredByB = true));
      await until(async () => deliveredByB, Boolean, 'relay B to deliver');

      frozenA.open();
      await until(
        () => fencedAt('handoff_relay'),
        (n) => n === before + 1,
        'the delete fenced',
      );
      expect(await stack.db('workflow_handoffs').where({ id }).select('attempts')).toEqual([{ attempts: 2 }]);
      expect(fenceLines('handoff_relay').at(-1)).toEqual(
        expect.objectContaining({ write: 'delete', handoff_id: id, workflow_id: endpoint.id, attempts: 1 }),
      );

      frozenB.open();
      await until(
        () => stack.db('workflow_handoffs').where({ id }),
        (rows) => rows.length === 0,
        'relay B to delete it',
      );
      expect(await fencedAt('handoff_relay')).toBe(before + 1);
    } finally {
      await Promise.all(relays.map((r) => r.stop()));
    }
  });
});

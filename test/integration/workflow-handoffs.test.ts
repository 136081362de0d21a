import { Client, WorkflowClientInterceptor, WorkflowNotFoundError } from '@temporalio/client';
import { createApp } from '../../src/app';
import { randomString } from '../../src/lib/ids';
import { buildMerchant } from '../helpers/factories';
import { call } from '../helpers/http';
import { createSession, historyOf, payableBody, SECOND, shopper, until } from '../helpers/checkout-payments';
import { RELAY_RETRY, startHandoffRelay } from '../../src/temporal/handoff-relay';
import { listen, startStack, Stack } from '../helpers/stack';
import { decisionUpdateFallbacks } from '../../src/telemetry/checkout';

/**
 * Durable handoffs from Postgres to Temporal: a process that dies between a commit and its
 * workflow start or signal leaves the handoff in `workflow_handoffs`, and the relay (as the worker
 * runs it) delivers it within seconds. The crash is a fault hook that throws right after the commit
 * (the request answers 500 and does nothing more, as a killed process would). Also: a create that
 * returns the open session at the same price starts no workflow.
 */
let stack: Stack;
/** The same app as the stack's, whose every request dies between its commit and its handoff. */
let crashing: { baseUrl: string; close: () => Promise<void> };
beforeAll(async () => {
  stack = await startStack();
  crashing = await listen(
    createApp({
      ...stack.deps,
      beforeHandoff: () => {
        throw new Error('process killed between the commit and the handoff');
      },
    }),
  );
});
afterAll(async () => {
  await crashing.close();
  await stack.stop();
});

type Merchant = Awaited<ReturnType<typeof buildMerchant>>;

/** How long the relay may take to heal a crash (the bound). */
const HEALED_WITHIN_MS = 10 * SECOND;

const handoffsOf = (workflowId: string) =>
  stack.db('workflow_handoffs').where({ workflow_id: workflowId }).orderBy('id').select('kind', 'merchant_id');

const workflowStatus = async (id: string) => {
  try {
    return (await stack.env.client.workflow.getHandle(id).describe()).status.name;
  } catch (err) {
    if (err instanceof WorkflowNotFoundError) return 'NOT_FOUND';
    throw err;
  }
};

/** Starts relaying the merchant's handoffs and waits until `healed` holds; returns the ms since `crashedAt`. */
async function relayUntil(m: Merchant, crashedAt: number, healed: () => Promise<boolean>, what: string) {
  stack.relayHandoffsOf(m.merchantId);
  await until(healed, what, HEALED_WITHIN_MS / 100);
  return Date.now() - crashedAt;
}

const sessionRead = async (m: Merchant, id: string) =>
  (await call(stack.baseUrl, 'GET', `/v1/checkout/sessions/${id}`, { key: m.secretKey })).body;

describe('a process killed between the commit and the handoff', () => {
  it('an attempt: committed pending, then handed to the session workflow by the relay within 10 s, which runs it', async () => {
    const m = await buildMerchant(stack.db);
    const s = await createSession(stack, m.secretKey, payableBody());
    const res = await shopper(crashing, m.publishableKey)('POST', `/sessions/${s.code}/attempts`, {
      body: { method: 'test' },
    });
    const crashedAt = Date.now();
    expect(res.status).toBe(500);
    const attempt = await stack.db('payment_attempts').where({ session_id: s.id }).first();
    expect(attempt.status).toBe('pending');
    expect((await sessionRead(m, s.id)).status).toBe('processing');
    expect(await handoffsOf(s.id)).toEqual([{ kind: 'attempt_started', merchant_id: m.merchantId }]);
    expect(await historyOf(stack, s.id)).not.toContain('signal attemptStarted');

    const elapsed = await relayUntil(
      m,
      crashedAt,
      async () => (await historyOf(stack, s.id)).includes('signal attemptStarted'),
      'the relay to hand the attempt over',
    );
    expect(elapsed).toBeLessThan(HEALED_WITHIN_MS);
    await until(async () => (await handoffsOf(s.id)).length === 0, 'the delivered handoff to be deleted');

    // The workflow owns it: a button settles it (a workflow that never adopted it would ignore the button).
    const pub = shopper(stack, m.publishableKey);
    expect((await pub('POST', `/test-gateway/${attempt.id}/decide`, { body: { decision: 'succeeded' } })).status).toBe(
      200,
    );
    await until(async () => (await sessionRead(m, s.id)).status === 'completed', 'the session to complete');
    expect((await sessionRead(m, s.id)).payment_status).toBe('paid');
  });

  it('a refund: committed requested, then its workflow started by the relay within 10 s, which settles it', async () => {
    const m = await buildMerchant(stack.db);
    const s = await createSession(stack, m.secretKey, payableBody({ amount: 10000 }));
    const pub = shopper(stack, m.publishableKey);
    const attempt = await pub('POST', `/sessions/${s.code}/attempts`, { body: { method: 'test' } });
    await pub('POST', `/test-gateway/${attempt.body.attempt_id}/decide`, { body: { decision: 'succeeded' } });
    await until(async () => (await sessionRead(m, s.id)).payment_status === 'paid', 'the payment');

    const idempotencyKey = `idem_${randomString(16)}`;
    const body = { session_id: s.id, amount: 4000 };
    const res = await call(crashing.baseUrl, 'POST', '/v1/refunds', { key: m.secretKey, body, idempotencyKey });
    const crashedAt = Date.now();
    expect(res.status).toBe(500);
    const refund = await stack.db('refunds').where({ session_id: s.id }).first();
    expect(refund.status).toBe('requested');
    expect(await handoffsOf(refund.id)).toEqual([{ kind: 'refund_start', merchant_id: m.merchantId }]);
    expect(await workflowStatus(refund.id)).toBe('NOT_FOUND');

    const getRefund = () => call(stack.baseUrl, 'GET', `/v1/refunds/${refund.id}`, { key: m.secretKey });
    const elapsed = await relayUntil(
      m,
      crashedAt,
      async () => (await getRefund()).body.status === 'succeeded',
      'the relay to start the refund workflow and the refund to settle',
    );
    expect(elapsed).toBeLessThan(HEALED_WITHIN_MS);
    await until(async () => (await handoffsOf(refund.id)).length === 0, 'the delivered handoff to be deleted');
    expect((await sessionRead(m, s.id)).payment_status).toBe('partially_refunded');
    // The merchant's retry after the 500 finds the same refund; nothing more is reserved.
    const retry = await call(stack.baseUrl, 'POST', '/v1/refunds', { key: m.secretKey, body, idempotencyKey });
    expect({ status: retry.status, id: retry.body.id }).toEqual({ status: 201, id: refund.id });
    expect(await stack.db('refunds').where({ session_id: s.id }).count({ n: '*' })).toEqual([{ n: 1 }]);
  });

  it('a session create: committed open, then its workflow and timer started by the relay within 10 s', async () => {
    const m = await buildMerchant(stack.db);
    const body = payableBody({ expires_at: new Date(stack.clock().getTime() + 30 * 60 * SECOND).toISOString() });
    const res = await call(crashing.baseUrl, 'POST', '/v1/checkout/sessions', {
      key: m.secretKey,
      body,
      idempotencyKey: `idem_${randomString(16)}`,
    });
    const crashedAt = Date.now();
    expect(res.status).toBe(500);
    const row = await stack.db('checkout_sessions').where({ merchant_id: m.merchantId }).first();
    expect(row.status).toBe('open');
    expect(await handoffsOf(row.id)).toEqual([{ kind: 'session_start', merchant_id: m.merchantId }]);
    expect(await workflowStatus(row.id)).toBe('NOT_FOUND');

    const elapsed = await relayUntil(
      m,
      crashedAt,
      async () => (await workflowStatus(row.id)) === 'RUNNING',
      'the relay to start the session workflow',
    );
    expect(elapsed).toBeLessThan(HEALED_WITHIN_MS);
    await until(async () => (await historyOf(stack, row.id)).length >= 2, 'the first workflow task');
    // The timer runs to expires_at as of delivery (the crash cost it no time).
    const [, timer] = await historyOf(stack, row.id);
    const seconds = Number(/^timer ([\d.]+) s/.exec(timer)?.[1]);
    expect(seconds).toBeGreaterThan(30 * 60 - 15);
    expect(seconds).toBeLessThanOrEqual(30 * 60);
    // The merchant's retry finds the session the crashed create wrote.
    const retry = await call(stack.baseUrl, 'POST', '/v1/checkout/sessions', {
      key: m.secretKey,
      body,
      idempotencyKey: `idem_${randomString(16)}`,
    });
    expect({ status: retry.status, id: retry.body.id }).toEqual({ status: 200, id: row.id });
  });

  it.each([
    ['POST /expire', 'expired'],
    ['a shopper cancel', 'canceled'],
  ])('%s: the session settled, then its workflow told by the relay within 10 s and ended', async (route, status) => {
    const m = await buildMerchant(stack.db);
    const s = await createSession(stack, m.secretKey, payableBody());
    expect(await workflowStatus(s.id)).toBe('RUNNING');
    const res =
      status === 'expired'
        ? await call(crashing.baseUrl, 'POST', `/v1/checkout/sessions/${s.id}/expire`, { key: m.secretKey })
        : await shopper(crashing, m.publishableKey)('POST', `/sessions/${s.code}/cancel`);
    const crashedAt = Date.now();
    expect(res.status).toBe(500);
    expect((await sessionRead(m, s.id)).status).toBe(status);
    expect(await handoffsOf(s.id)).toEqual([{ kind: 'session_settled', merchant_id: m.merchantId }]);
    expect(await workflowStatus(s.id)).toBe('RUNNING');

    const elapsed = await relayUntil(
      m,
      crashedAt,
      async () => (await workflowStatus(s.id)) === 'COMPLETED',
      `the relay to tell the workflow (${route})`,
    );
    expect(elapsed).toBeLessThan(HEALED_WITHIN_MS);
    expect(await stack.env.client.workflow.getHandle(s.id).result()).toBe(status);
  });
});

describe('Temporal refusing the handoff', () => {
  /** A client on the stack's Temporal server whose every start and signal is refused. */
  const refuse = () => Promise.reject(new Error('14 UNAVAILABLE: Temporal is down'));
  const refusing: WorkflowClientInterceptor = { startWithDetails: refuse, signal: refuse, signalWithStart: refuse };
  const refusingClient = () =>
    new Client({
      connection: stack.env.connection,
      namespace: stack.env.namespace ?? 'default',
      interceptors: { workflow: [refusing] },
    });

  it('still answers the create 201; a refused delivery is recorded and retried after its lease', async () => {
    const api = await listen(createApp({ ...stack.deps, temporal: refusingClient() }));
    try {
      const m = await buildMerchant(stack.db);
      const res = await call(api.baseUrl, 'POST', '/v1/checkout/sessions', {
        key: m.secretKey,
        body: payableBody(),
        idempotencyKey: `idem_${randomString(16)}`,
      });
      expect(res.status).toBe(201);
      expect(await handoffsOf(res.body.id)).toEqual([{ kind: 'session_start', merchant_id: m.merchantId }]);

      // A relay that Temporal refuses too: it records the error and leases the row until the retry.
      const down = startHandoffRelay({
        db: stack.db,
        temporal: refusingClient(),
        taskQueue: stack.taskQueue,
        merchantIds: new Set([m.merchantId]),
      });
      try {
        await until(
          async () => (await stack.db('workflow_handoffs').where({ workflow_id: res.body.id }).first()).attempts === 1,
          'the relay to try once',
        );
      } finally {
        await down.stop();
      }
      const row = await stack.db('workflow_handoffs').where({ workflow_id: res.body.id }).first();
      expect(row.last_error).toBe('14 UNAVAILABLE: Temporal is down');
      const leaseMs = new Date(row.next_attempt_at).getTime() - Date.now();
      expect(leaseMs).toBeGreaterThan(RELAY_RETRY.firstSeconds * SECOND - 2 * SECOND);
      expect(leaseMs).toBeLessThanOrEqual(RELAY_RETRY.firstSeconds * SECOND);
      expect(await workflowStatus(res.body.id)).toBe('NOT_FOUND');

      // Temporal is back: the retry starts the workflow.
      stack.relayHandoffsOf(m.merchantId);
      await until(async () => (await workflowStatus(res.body.id)) === 'RUNNING', 'the retry', 150);
      await until(async () => (await handoffsOf(res.body.id)).length === 0, 'the delivered handoff to be deleted');
    } finally {
      await api.close();
    }
  });
});

describe('a handoff of a kind this release does not know (written by a newer release)', () => {
  it('is kept and retried with backoff, never deleted unsent', async () => {
    const m = await buildMerchant(stack.db);
    const workflowId = `cs_test_${randomString(16)}`;
    const payload = { kind: 'from_a_newer_release', sessionId: workflowId };
    await stack.db('workflow_handoffs').insert({
      merchant_id: m.merchantId,
      mode: 'test',
      workflow_id: workflowId,
      kind: payload.kind,
      payload,
      next_attempt_at: new Date(),
    });
    const relay = startHandoffRelay({
      db: stack.db,
      temporal: stack.env.client,
      taskQueue: stack.taskQueue,
      merchantIds: new Set([m.merchantId]),
    });
    try {
      await until(
        async () => (await stack.db('workflow_handoffs').where({ workflow_id: workflowId }).first())?.attempts === 1,
        'the relay to try once',
      );
    } finally {
      await relay.stop();
    }
    const row = await stack.db('workflow_handoffs').where({ workflow_id: workflowId }).first();
    expect(row.last_error).toBe('handoff kind from_a_newer_release is not known to this release');
    expect(new Date(row.next_attempt_at).getTime()).toBeGreaterThan(Date.now());
  });
});

describe('workflow starts and signals on create', () => {
  /** The stack's app over a Temporal client that records every start and signal it sends. */
  async function recordingApi() {
    const calls: string[] = [];
    const recorder: WorkflowClientInterceptor = {
      startWithDetails: (input, next) => {
        calls.push(`start ${input.workflowType} ${input.options.workflowId}`);
        return next(input);
      },
      signal: (input, next) => {
        calls.push(`signal ${input.signalName} ${input.workflowExecution.workflowId}`);
        return next(input);
      },
      signalWithStart: (input, next) => {
        calls.push(`signalWithStart ${input.signalName} ${input.options.workflowId}`);
        return next(input);
      },
    };
    const temporal = new Client({
      connection: stack.env.connection,
      namespace: stack.env.namespace ?? 'default',
      interceptors: { workflow: [recorder] },
    });
    const api = await listen(createApp({ ...stack.deps, temporal }));
    return { ...api, calls };
  }

  it('starts one workflow for a new session, none for a same-price 200, and replaces on a new price', async () => {
    const api = await recordingApi();
    try {
      const m = await buildMerchant(stack.db);
      const body = payableBody();
      const create = (b: Record<string, unknown>) =>
        call(api.baseUrl, 'POST', '/v1/checkout/sessions', {
          key: m.secretKey,
          body: b,
          idempotencyKey: `idem_${randomString(16)}`,
        });
      const first = await create(body);
      expect(first.status).toBe(201);
      expect(api.calls).toEqual([`start sessionWorkflow ${first.body.id}`]);

      const again = await create(body);
      expect({ status: again.status, id: again.body.id }).toEqual({ status: 200, id: first.body.id });
      expect(api.calls).toEqual([`start sessionWorkflow ${first.body.id}`]);

      const repriced = await create({
        ...body,
        amount: 26000,
        line_items: [{ label: 'Order', amount: 26000, type: 'charge' }],
      });
      expect(repriced.status).toBe(201);
      expect(api.calls).toEqual([
        `start sessionWorkflow ${first.body.id}`,
        `signal sessionSettled ${first.body.id}`,
        `start sessionWorkflow ${repriced.body.id}`,
      ]);
      // Delivered handoffs are deleted in the background, at once.
      await until(
        async () =>
          (await stack.db('workflow_handoffs').whereIn('workflow_id', [first.body.id, repriced.body.id])).length === 0,
        'the delivered handoffs to be deleted',
      );
      expect(await stack.env.client.workflow.getHandle(first.body.id).result()).toBe('expired');
    } finally {
      await api.close();
    }
  });
});

describe('a test-gateway press whose session workflow is gone by the time it is signalled', () => {
  /** A session with a pending test attempt whose workflow was terminated (neither the Update nor the signal finds it). */
  async function orphanedAttempt() {
    const m = await buildMerchant(stack.db);
    const s = await createSession(stack, m.secretKey, payableBody());
    const pub = shopper(stack, m.publishableKey);
    const attempt = (await pub('POST', `/sessions/${s.code}/attempts`, { body: { method: 'test' } })).body;
    await until(async () => (await historyOf(stack, s.id)).includes('signal attemptStarted'), 'the attempt adopted');
    await stack.env.client.workflow.getHandle(s.id).terminate('the test');
    return { pub, attemptId: attempt.attempt_id as string };
  }

  it('answers 503 with Retry-After and takes the decision back, so the shopper can press again', async () => {
    const { pub, attemptId } = await orphanedAttempt();
    const res = await pub('POST', `/test-gateway/${attemptId}/decide`, { body: { decision: 'succeeded' } });
    expect(res.status).toBe(503);
    expect(res.headers.get('retry-after')).toBe('5');
    expect(res.body.error.code).toBe('service_unavailable');
    expect(await stack.db('payment_attempts').where({ id: attemptId }).first('status', 'decision')).toEqual({
      status: 'pending',
      decision: null,
    });
  });

  it('answers the outcome when the attempt was settled meanwhile (a late Update applied, the workflow ended)', async () => {
    const { pub, attemptId } = await orphanedAttempt();
    // The workflow's settling, in the press's own write: the attempt succeeds as its decision is recorded.
    const trigger = `settle_${attemptId.replace(/\W/g, '_')}`;
    await stack.db.raw(`CREATE FUNCTION ${trigger}() RETURNS trigger LANGUAGE plpgsql AS $$
      BEGIN NEW.status := 'succeeded'; RETURN NEW; END $$`);
    await stack.db.raw(`CREATE TRIGGER ${trigger} BEFORE UPDATE OF decision ON payment_attempts FOR EACH ROW
      WHEN (NEW.id = '${attemptId}' AND NEW.decision IS NOT NULL) EXECUTE FUNCTION ${trigger}()`);
    try {
      const res = await pub('POST', `/test-gateway/${attemptId}/decide`, { body: { decision: 'succeeded' } });
      expect({ status: res.status, body: res.body }).toMatchObject({
        status: 200,
        body: { attempt_id: attemptId, status: 'succeeded' },
      });
    } finally {
      await stack.db.raw(`DROP TRIGGER ${trigger} ON payment_attempts`);
      await stack.db.raw(`DROP FUNCTION ${trigger}()`);
    }
  });
});

describe('a test-gateway press whose Update is not taken', () => {
  it('answers 200 pending with its return_url, goes as the signal, and the attempt settles by it', async () => {
    // A client whose every Update is refused (Temporal shedding it, a run of a release without the handler).
    const refusing: WorkflowClientInterceptor = {
      startUpdate: () => Promise.reject(new Error('14 UNAVAILABLE: the Update was not taken')),
    };
    const client = new Client({
      connection: stack.env.connection,
      namespace: stack.env.namespace ?? 'default',
      interceptors: { workflow: [refusing] },
    });
    const api = await listen(createApp({ ...stack.deps, temporal: client }));
    try {
      const m = await buildMerchant(stack.db);
      const s = await createSession(stack, m.secretKey, payableBody());
      const pub = shopper(stack, m.publishableKey);
      const attempt = (await pub('POST', `/sessions/${s.code}/attempts`, { body: { method: 'test' } })).body;
      await until(async () => (await historyOf(stack, s.id)).includes('signal attemptStarted'), 'the attempt adopted');
      const fallbacks = async () => (await decisionUpdateFallbacks.get()).values[0]?.value ?? 0;
      const before = await fallbacks();

      const res = await shopper(api, m.publishableKey)('POST', `/test-gateway/${attempt.attempt_id}/decide`, {
        body: { decision: 'succeeded' },
      });
      expect({ status: res.status, body: res.body }).toEqual({
        status: 200,
        body: {
          attempt_id: attempt.attempt_id,
          status: 'pending',
          return_url: `${stack.settings.PUBLIC_BASE_URL}/r/${attempt.attempt_id}`,
        },
      });
      expect(await fallbacks()).toBe(before + 1);
      await until(async () => (await sessionRead(m, s.id)).payment_status === 'paid', 'the signal to settle it');
      const history = await historyOf(stack, s.id);
      expect(history).toContain('signal attemptDecision');
      expect(history).not.toContain('update attemptDecide');
    } finally {
      await api.close();
    }
  });
});

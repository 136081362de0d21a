import Koa from 'koa';
import { temporal } from '@temporalio/proto';
import { Worker } from '@temporalio/worker';
import { createActivities } from '../../activities';
import { checkoutStack } from '../../src/app';
import type { Gateways } from '../../src/checkout/gateways';
import type { PublicAdapters } from '../../src/checkout/public-routes';
import { checkoutRouter } from '../../src/checkout/routes';
import type { Db } from '../../src/db/knex';
import { randomString } from '../../src/lib/ids';
import { webhookRuntime } from '../../src/webhooks/runtime';
import { workerTracingOptions } from '../../src/telemetry/temporal';
import { call, TestResponse } from './http';
import { listen, readRunEnv, Stack } from './stack';
import { eventsAbout } from './events';

/**
 * Shared by the tests of paying a session: a merchant's session, the shopper's calls on the
 * public routes (each test file from its own client IP, so per-IP limits never cross files),
 * the SMS outbox, polling in real time and reading a workflow's history.
 */

export const SECOND = 1000;
export const MINUTE = 60 * SECOND;
export const HOUR = 60 * MINUTE;

/** A session body; `amount` also sets the one charge line, so line items always reconcile. */
export function sessionBody(over: Record<string, unknown> = {}): Record<string, any> {
  const amount = (over.amount as number | undefined) ?? 25000;
  return {
    reference_id: `order-${randomString(12)}`,
    amount,
    currency: 'IQD',
    line_items: [{ label: 'Order', amount, type: 'charge' }],
    payment_method_types: ['test', 'cashondelivery'],
    success_url: 'https://shop.example.com/done?order=7',
    cancel_url: 'https://shop.example.com/cart',
    ...over,
  };
}

/** A session that needs no verification or details, so attempts can start at once. */
export const payableBody = (over: Record<string, unknown> = {}) =>
  sessionBody({ collect: { phone: 'none', name: 'optional', shipping_address: 'none' }, ...over });

/** Creates a session as the merchant would (201 expected). */
export async function createSession(api: { baseUrl: string }, secretKey: string, body: Record<string, unknown>) {
  const res = await call(api.baseUrl, 'POST', '/v1/checkout/sessions', {
    key: secretKey,
    body,
    idempotencyKey: `idem_${randomString(16)}`,
  });
  if (res.status !== 201) throw new Error(`create answered ${res.status}: ${res.text}`);
  return res.body;
}

/** A session of `amount` 10000 (unless `over` says otherwise) paid on the test gateway (its Succeed button), as a shopper would. */
export async function paidSession(
  api: { baseUrl: string },
  keys: { secretKey: string; publishableKey: string },
  over: Record<string, unknown> = {},
) {
  const s = await createSession(api, keys.secretKey, payableBody({ amount: 10000, ...over }));
  const pub = shopper(api, keys.publishableKey);
  const attempt = await pub('POST', `/sessions/${s.code}/attempts`, { body: { method: 'test' } });
  await pub('POST', `/test-gateway/${attempt.body.attempt_id}/decide`, { body: { decision: 'succeeded' } });
  const read = async () =>
    (await call(api.baseUrl, 'GET', `/v1/checkout/sessions/${s.id}`, { key: keys.secretKey })).body;
  await until(async () => (await read()).payment_status === 'paid', 'the payment');
  return { ...(await read()), attemptId: attempt.body.attempt_id as string };
}

/** A random client IP in 10/8, so each caller has its own per-IP windows. */
export const randomIp = () =>
  `10.${Math.floor(Math.random() * 256)}.${Math.floor(Math.random() * 256)}.${1 + Math.floor(Math.random() * 254)}`;

/** A random Iraqi mobile number in E.164 (never the test phone). */
export const randomPhone = () => `+9647${String(100000000 + Math.floor(Math.random() * 899999999))}`;

export interface ShopperOptions {
  body?: unknown;
  token?: string;
  ip?: string;
  headers?: Record<string, string>;
}

/** The shopper's browser: calls a public route with the publishable key, from `ip`. */
export function shopper(api: { baseUrl: string }, publishableKey: string, defaultIp = randomIp()) {
  return (method: string, path: string, opts: ShopperOptions = {}): Promise<TestResponse> =>
    call(api.baseUrl, method, `/v1/public${path}`, {
      key: publishableKey,
      body: opts.body,
      headers: {
        'x-forwarded-for': opts.ip ?? defaultIp,
        ...(opts.token ? { 'x-svc-customer-token': opts.token } : {}),
        ...opts.headers,
      },
    });
}

/** Asserts status, error code and details in one comparison, so a failure shows all three. */
export function expectError(res: TestResponse, status: number, code: string, details: unknown[] = []) {
  expect({ status: res.status, code: res.body?.error?.code, details: res.body?.error?.details }).toEqual({
    status,
    code,
    details,
  });
}

/** The latest code the SMS outbox holds for `phone`. */
export async function smsCode(db: Db, phone: string): Promise<string | undefined> {
  const row = await db('outbox').where({ kind: 'sms', to: phone }).orderBy('id', 'desc').first();
  return row ? /\b(\d{6})\b/.exec(row.body)?.[1] : undefined;
}

/** Polls `check` in real time (activities need it to finish) until it holds. */
export async function until(check: () => Promise<boolean>, what: string, tries = 150): Promise<void> {
  for (let i = 0; i < tries; i++) {
    if (await check()) return;
    await new Promise((r) => setTimeout(r, 100));
  }
  throw new Error(`timed out waiting for ${what}`);
}

const EventType = temporal.api.enums.v1.EventType;

const summaryOf = (e: temporal.api.history.v1.IHistoryEvent) =>
  e.userMetadata?.summary?.data ? JSON.parse(Buffer.from(e.userMetadata.summary.data).toString()) : '';

/** A workflow's history as short lines (timers with their whole seconds and summary, signals, activities). */
export async function historyOf(stack: Stack, workflowId: string): Promise<string[]> {
  const history = await stack.env.client.workflow.getHandle(workflowId).fetchHistory();
  return (history.events ?? []).flatMap((e) => {
    switch (e.eventType) {
      case EventType.EVENT_TYPE_WORKFLOW_EXECUTION_STARTED:
        return [`started ${e.workflowExecutionStartedEventAttributes?.workflowType?.name}`];
      case EventType.EVENT_TYPE_TIMER_STARTED: {
        const t = e.timerStartedEventAttributes?.startToFireTimeout;
        // Whole seconds: a timer to a recorded deadline is a few ms short of the whole span.
        const seconds = Math.round(Number(t?.seconds ?? 0) + Number(t?.nanos ?? 0) / 1e9);
        return [`timer ${seconds} s: ${summaryOf(e)}`];
      }
      case EventType.EVENT_TYPE_TIMER_FIRED:
        return ['timer fired'];
      case EventType.EVENT_TYPE_TIMER_CANCELED:
        return ['timer canceled'];
      case EventType.EVENT_TYPE_WORKFLOW_EXECUTION_SIGNALED:
        return [`signal ${e.workflowExecutionSignaledEventAttributes?.signalName}`];
      case EventType.EVENT_TYPE_WORKFLOW_EXECUTION_UPDATE_ACCEPTED:
        return [`update ${e.workflowExecutionUpdateAcceptedEventAttributes?.acceptedRequest?.input?.name}`];
      case EventType.EVENT_TYPE_ACTIVITY_TASK_SCHEDULED:
        return [`activity ${e.activityTaskScheduledEventAttributes?.activityType?.name}`];
      case EventType.EVENT_TYPE_MARKER_RECORDED:
        return e.markerRecordedEventAttributes?.markerName === 'core_local_activity'
          ? [`local activity ${localActivityType(e)}`]
          : [];
      case EventType.EVENT_TYPE_WORKFLOW_EXECUTION_COMPLETED:
        return ['completed'];
      default:
        return [];
    }
  });
}

/** The activity type a local activity's marker recorded (its `data` detail, JSON). */
function localActivityType(e: temporal.api.history.v1.IHistoryEvent): string {
  const data = e.markerRecordedEventAttributes?.details?.data?.payloads?.[0]?.data;
  return data
    ? ((JSON.parse(Buffer.from(data).toString('utf8')) as { activity_type?: string }).activity_type ?? '?')
    : '?';
}

/** Waits until the workflow's history ends with `last` (the workflow has acted and is waiting). */
export async function untilHistoryEndsWith(stack: Stack, workflowId: string, last: string): Promise<void> {
  await until(async () => (await historyOf(stack, workflowId)).at(-1) === last, `history to end with "${last}"`);
}

const taskOut = (history: temporal.api.history.v1.IHistory) =>
  [EventType.EVENT_TYPE_WORKFLOW_TASK_SCHEDULED, EventType.EVENT_TYPE_WORKFLOW_TASK_STARTED].includes(
    history.events?.at(-1)?.eventType ?? EventType.EVENT_TYPE_UNSPECIFIED,
  );

/** The events of `type` recorded about session `sessionId`, oldest first. */
export const sessionEvents = (db: Db, sessionId: string, type: string) => eventsAbout(db, sessionId, type);

/**
 * A Checkout API of its own beside the stack (same Temporal server and clock, its own task queue,
 * optionally its own database, adapters, or vendors for its worker's activities) with a worker the
 * test can stop and start (the stack's
 * `restartWorker` cannot leave time to pass in between).
 */
export async function sideApi(
  stack: Stack,
  opts: { db?: Db; adapters?: PublicAdapters; workerGateways?: Gateways } = {},
) {
  const taskQueue = `side-${randomString(10)}`;
  const db = opts.db ?? stack.db;
  const deps = { ...stack.deps, db, settings: { ...stack.deps.settings, TEMPORAL_TASK_QUEUE: taskQueue } };
  const app = new Koa({ proxy: true });
  app.use(checkoutStack(deps, checkoutRouter(deps, opts.adapters)));
  const http = await listen(app);
  let current: { worker: Worker; running: Promise<void> } | null = null;
  const sessions: string[] = [];
  const side = {
    baseUrl: http.baseUrl,
    taskQueue,
    /** Creates a session here; its workflow is ended on close, so none is left on a queue no worker polls. */
    async createSession(secretKey: string, body: Record<string, unknown>) {
      const session = await createSession(side, secretKey, body);
      sessions.push(session.id);
      return session;
    },
    async startWorker() {
      // No sticky cache: the time-skipping server never hands a sticky task of a stopped worker
      // back to the normal queue (a real server does after 10 s), so a replacement would wait for ever.
      const worker = await Worker.create({
        connection: stack.env.nativeConnection,
        namespace: stack.env.namespace ?? 'default',
        taskQueue,
        activities: createActivities({
          db,
          clock: stack.clock,
          publicBaseUrl: stack.settings.PUBLIC_BASE_URL,
          webhooks: stack.deps.webhooks ?? webhookRuntime(stack.settings),
          gateways: opts.workerGateways,
        }),
        workflowBundle: { codePath: readRunEnv().workflowBundlePath },
        sinks: workerTracingOptions().sinks,
        maxCachedWorkflows: 0,
      });
      current = { worker, running: worker.run() };
    },
    async stopWorker() {
      if (!current) return;
      current.worker.shutdown();
      await current.running;
      current = null;
    },
    async close() {
      for (const id of sessions) {
        // A timer firing on a queue nobody polls would stop the test server from skipping time,
        // and so would a run ended while its workflow task is out: let the worker finish it first.
        const handle = stack.env.client.workflow.getHandle(id);
        if (current) await until(async () => !taskOut(await handle.fetchHistory()), `${id}'s workflow task`, 50);
        await handle.terminate('test over').catch(() => undefined);
      }
      await side.stopWorker();
      await http.close();
    },
  };
  await side.startWorker();
  return side;
}

/** Runs `body` with the app clock frozen at `at`, then puts the clock back where it was running. */
export async function withFrozenClock<T>(stack: Stack, at: Date, body: () => Promise<T>): Promise<T> {
  const offset = stack.clock().getTime() - Date.now();
  stack.clock.freeze(at);
  try {
    return await body();
  } finally {
    stack.clock.unfreeze();
    stack.clock.advance(offset - (stack.clock().getTime() - Date.now()));
  }
}

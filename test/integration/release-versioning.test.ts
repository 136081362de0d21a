import { InterceptingCall, ListenerBuilder, status as grpcStatus, type Interceptor } from '@grpc/grpc-js';
import { Connection } from '@temporalio/client';
import type { Worker } from '@temporalio/worker';
import type { WorkerDeploymentVersion } from '@temporalio/common';
import { temporal } from '@temporalio/proto';
import { createApp } from '../../src/app';
import { run } from '../../src/cli/run';
import { promoteBuild, type ReleaseStatus } from '../../src/ops/release';
import { defaultGateways, type Gateways, testGateway } from '../../src/checkout/gateways';
import { randomString } from '../../src/lib/ids';
import { describeDeployment, serviceTaskQueues, type ReleaseTarget } from '../../src/temporal/deployment';
import { createWorker } from '../../src/worker/create-worker';
import { promoteIfFresh } from '../../src/worker/deployment';
import { createSession, payableBody, shopper, until } from '../helpers/checkout-payments';
import { buildMerchant } from '../helpers/factories';
import { call } from '../helpers/http';
import { EXPECTED_FAILURE, listen, readRunEnv, startStack, type Stack } from '../helpers/stack';

/**
 * Worker Deployment Versioning on a real `temporal server start-dev` (the time-skipping server has
 * no Worker Deployments): the real worker factory runs two builds of one deployment in this
 * process, `ops release promote` moves routing from one to the other and `ops release status`
 * says at each step what every build still runs and whether its workers can stop. A session
 * (AUTO_UPGRADE) started on the old build finishes on the new one; a refund (PINNED) finishes on
 * the build it started on; no workflow task fails.
 */
jest.setTimeout(240_000);

const BUILD_A = 'build-a';
const BUILD_B = 'build-b';

let stack: Stack;
/** The vendor: while `down`, every refund call fails as an outage; `refundsBy` records which build's activity asked. */
const vendor = { down: false, refundsBy: [] as string[] };

/** The test gateway as build `build`'s workers call it. */
function gatewaysOf(build: string): Gateways {
  return {
    ...defaultGateways,
    test: {
      ...testGateway,
      async refund(input) {
        vendor.refundsBy.push(build);
        if (vendor.down) throw new Error(`vendor unavailable ${EXPECTED_FAILURE}`);
        return testGateway.refund(input);
      },
    },
  };
}

const started: Array<{ worker: Worker; running: Promise<void> }> = [];

beforeAll(async () => {
  stack = await startStack({ TEMPORAL_BUILD_ID: BUILD_A }, { temporal: 'dev-server', gateways: gatewaysOf(BUILD_A) });
}, 180_000);
afterAll(async () => {
  for (const w of started) w.worker.shutdown();
  await Promise.all(started.map((w) => w.running));
  await stack.stop();
});

/** A worker of `deployment` (null: unversioned, as the release before versioning runs) on `taskQueue`, from the real factory. */
async function startWorker(taskQueue: string, deployment: WorkerDeploymentVersion | null) {
  const worker = await createWorker({
    connection: stack.env.nativeConnection,
    namespace: 'default',
    taskQueue,
    db: stack.db,
    clock: stack.clock,
    publicBaseUrl: stack.settings.PUBLIC_BASE_URL,
    webhooks: stack.deps.webhooks,
    // An unversioned worker bundles its own workflows (without their versioning behaviours).
    workflowBundle: deployment ? { codePath: readRunEnv().workflowBundlePath } : undefined,
    deployment,
    gateways: gatewaysOf(deployment?.buildId ?? 'unversioned'),
  });
  const running = { worker, running: worker.run() };
  started.push(running);
  return running;
}

/** `ops <argv> --json` against the stack's Temporal server for the deployment of `taskQueue`; the document, or the error document. */
async function ops(taskQueue: string, ...argv: string[]): Promise<any> {
  const result = await run([...argv, '--json'], {
    db: stack.db,
    settings: { ...stack.deps.settings, TEMPORAL_TASK_QUEUE: taskQueue },
    temporal: async () => stack.env.client,
  });
  const doc = JSON.parse(result.stdout);
  expect({ exitCode: result.exitCode, error: doc.error }).toEqual(
    doc.error ? { exitCode: 1, error: doc.error } : { exitCode: 0, error: undefined },
  );
  return doc;
}

/** What `release promote` prints when it makes build B current in place of build A. */
const promotedAToB = (deployment: string) => ({
  deployment,
  build_id: BUILD_B,
  previous_build_id: BUILD_A,
  ramping_percentage: null,
  changed: true,
  message: `build ${BUILD_B} is now current (current before: build ${BUILD_A})`,
});

const buildIn = (status: ReleaseStatus, buildId: string | null) => status.builds.find((b) => b.build_id === buildId);

/** Waits until `release status` says `buildId` is `verdict`; returns that status. */
async function untilVerdict(taskQueue: string, buildId: string | null, verdict: string) {
  let last: any;
  await until(
    async () => {
      last = await ops(taskQueue, 'release', 'status');
      return buildIn(last, buildId)?.verdict === verdict;
    },
    `build ${buildId} to be "${verdict}" (last: ${JSON.stringify(last && buildIn(last, buildId))})`,
    300,
  );
  return last;
}

const { EventType, VersioningBehavior } = temporal.api.enums.v1;

/** Per workflow task completed: the build that ran it and the behaviour it reported; and how many tasks failed. */
async function workflowTasks(workflowId: string) {
  const history = await stack.env.client.workflow.getHandle(workflowId).fetchHistory();
  const events = history.events ?? [];
  return {
    tasks: events.flatMap((e) => {
      const done = e.workflowTaskCompletedEventAttributes;
      if (!done) return [];
      const behavior = VersioningBehavior[done.versioningBehavior ?? 0].replace('VERSIONING_BEHAVIOR_', '');
      return [`${done.deploymentVersion?.buildId ?? 'unversioned'} ${behavior}`];
    }),
    failed: events.filter((e) =>
      [EventType.EVENT_TYPE_WORKFLOW_TASK_FAILED, EventType.EVENT_TYPE_WORKFLOW_TASK_TIMED_OUT].includes(
        e.eventType ?? EventType.EVENT_TYPE_UNSPECIFIED,
      ),
    ).length,
  };
}

const busy = [
  EventType.EVENT_TYPE_WORKFLOW_TASK_SCHEDULED,
  EventType.EVENT_TYPE_WORKFLOW_TASK_STARTED,
  EventType.EVENT_TYPE_ACTIVITY_TASK_SCHEDULED,
  EventType.EVENT_TYPE_ACTIVITY_TASK_STARTED,
];

/** Waits until the run waits for something from outside (no workflow or activity task out). */
async function untilIdle(workflowId: string) {
  const handle = stack.env.client.workflow.getHandle(workflowId);
  await until(async () => {
    const last = (await handle.fetchHistory()).events?.at(-1)?.eventType;
    return last !== undefined && last !== null && !busy.includes(last);
  }, `${workflowId} to wait`);
}

/** Live pollers of `buildId` in a status, as `queue type` (none while the status does not list the build yet). */
const livePollers = (status: any, buildId: string | null) =>
  [
    ...new Set(
      ((buildIn(status, buildId) as any)?.pollers ?? [])
        .filter((p: { live: boolean }) => p.live)
        .map((p: { task_queue: string; type: string }) => `${p.task_queue} ${p.type}`),
    ),
  ].sort();

const queuesOf = (taskQueue: string) =>
  serviceTaskQueues(taskQueue)
    .map((q) => `${q.name} ${q.type}`)
    .sort();

/** A checkout API for the merchants of `taskQueue`'s deployment (the stack's, or another one beside it). */
async function apiOn(taskQueue: string) {
  if (taskQueue === stack.taskQueue) return { baseUrl: stack.baseUrl, close: async () => undefined };
  return listen(createApp({ ...stack.deps, settings: { ...stack.deps.settings, TEMPORAL_TASK_QUEUE: taskQueue } }));
}

/** A session with a test-gateway attempt pending: its workflow waits for the shopper's decision (a signal). */
async function sessionAwaitingDecision(api: { baseUrl: string }) {
  const m = await buildMerchant(stack.db);
  const s = await createSession(api, m.secretKey, payableBody());
  const pub = shopper(api, m.publishableKey);
  const attempt = await pub('POST', `/sessions/${s.code}/attempts`, { body: { method: 'test' } });
  expect(attempt.status).toBe(201);
  const read = async () => (await call(api.baseUrl, 'GET', `/v1/checkout/sessions/${s.id}`, { key: m.secretKey })).body;
  await until(async () => (await read()).status === 'processing', 'the attempt to start');
  return {
    id: s.id as string,
    decide: () => pub('POST', `/test-gateway/${attempt.body.attempt_id}/decide`, { body: { decision: 'succeeded' } }),
    read,
  };
}

/** A paid session's refund, created by the merchant; its workflow starts at once. */
async function refundOfPaidSession() {
  const m = await buildMerchant(stack.db);
  const s = await createSession(stack, m.secretKey, payableBody({ amount: 10000 }));
  const pub = shopper(stack, m.publishableKey);
  const attempt = await pub('POST', `/sessions/${s.code}/attempts`, { body: { method: 'test' } });
  await pub('POST', `/test-gateway/${attempt.body.attempt_id}/decide`, { body: { decision: 'succeeded' } });
  const session = async () =>
    (await call(stack.baseUrl, 'GET', `/v1/checkout/sessions/${s.id}`, { key: m.secretKey })).body;
  await until(async () => (await session()).payment_status === 'paid', 'the payment');
  const created = await call(stack.baseUrl, 'POST', '/v1/refunds', {
    key: m.secretKey,
    body: { session_id: s.id, amount: 4000 },
    idempotencyKey: `idem_${randomString(16)}`,
  });
  expect(created.status).toBe(201);
  const read = async () =>
    (await call(stack.baseUrl, 'GET', `/v1/refunds/${created.body.id}`, { key: m.secretKey })).body;
  return { id: created.body.id as string, read };
}

describe('from build to build', () => {
  it('a session started on the old build completes on the new one after promotion; a refund pinned to the old build finishes there, and the old build drains', async () => {
    const q = stack.taskQueue;
    // A brand-new deployment: the stack's worker (build A) made itself current.
    let status = await ops(q, 'release', 'status');
    expect(status).toMatchObject({ deployment: q, current_build_id: BUILD_A, ramping: null });
    expect(buildIn(status, BUILD_A)).toMatchObject({ status: 'current', verdict: 'current', safe_to_stop: false });
    expect(livePollers(status, BUILD_A)).toEqual(queuesOf(q));

    const session = await sessionAwaitingDecision(stack);
    vendor.down = true;
    const refund = await refundOfPaidSession();
    await until(async () => vendor.refundsBy.length > 0, 'the refund to reach the vendor');

    // Build B starts beside A: it must not take over a deployment A serves.
    await startWorker(q, { deploymentName: q, buildId: BUILD_B });
    const target: ReleaseTarget = { namespace: 'default', deploymentName: q, taskQueue: q };
    const own = await promoteIfFresh(stack.env.nativeConnection, target, BUILD_B, 'test', 20_000);
    expect(own).toEqual({ outcome: 'left_to_operator', reason: `build ${BUILD_A} is current` });
    await until(async () => {
      status = await ops(q, 'release', 'status');
      return livePollers(status, BUILD_B).length === 3;
    }, "build B's pollers on every queue");
    expect(status.current_build_id).toBe(BUILD_A);
    expect(buildIn(status, BUILD_B)).toMatchObject({
      status: 'inactive',
      verdict: 'inactive (never current): safe to stop',
      running_workflows: 0,
    });
    expect(livePollers(status, BUILD_B)).toEqual(queuesOf(q));
    expect(buildIn(status, BUILD_A)).toMatchObject({ status: 'current', pinned_workflows: 1 });

    // A ramp first: B takes a share of new and auto-upgrading runs, A stays current.
    expect(await ops(q, 'release', 'promote', '--build-id', BUILD_B, '--ramp', '25')).toEqual({
      deployment: q,
      build_id: BUILD_B,
      previous_build_id: BUILD_A,
      ramping_percentage: 25,
      changed: true,
      message: `build ${BUILD_B} now ramps at 25% (current before: build ${BUILD_A})`,
    });
    status = await ops(q, 'release', 'status');
    expect(status).toMatchObject({ current_build_id: BUILD_A, ramping: { build_id: BUILD_B, percentage: 25 } });
    expect(buildIn(status, BUILD_B)).toMatchObject({
      status: 'ramping',
      verdict: 'ramping (25%)',
      safe_to_stop: false,
    });

    expect(await ops(q, 'release', 'promote', '--build-id', BUILD_B)).toEqual(promotedAToB(q));
    status = await ops(q, 'release', 'status');
    expect(status).toMatchObject({ current_build_id: BUILD_B, ramping: null });
    expect(status.builds.map((b: { build_id: string }) => b.build_id)).toEqual([BUILD_B, BUILD_A]);
    // The refund runs nowhere but on A: A must keep its workers.
    expect(buildIn(status, BUILD_A)).toMatchObject({
      status: 'draining',
      verdict: 'draining (1 pinned workflow)',
      safe_to_stop: false,
      pinned_workflows: 1,
    });

    // The session moves to B at its next task.
    await session.decide();
    await until(async () => (await session.read()).status === 'completed', 'the session to complete');
    const sessionRun = stack.env.client.workflow.getHandle(session.id);
    await until(async () => (await sessionRun.describe()).status.name === 'COMPLETED', 'the session workflow to end');
    const sessionTasks = await workflowTasks(session.id);
    expect(sessionTasks.failed).toBe(0);
    expect(sessionTasks.tasks[0]).toBe(`${BUILD_A} AUTO_UPGRADE`);
    expect(sessionTasks.tasks.at(-1)).toBe(`${BUILD_B} AUTO_UPGRADE`);
    const firstOnB = sessionTasks.tasks.indexOf(`${BUILD_B} AUTO_UPGRADE`);
    expect(sessionTasks.tasks.slice(firstOnB).every((t) => t === `${BUILD_B} AUTO_UPGRADE`)).toBe(true);

    // The vendor is back: the refund finishes on A, whose workers are still there.
    vendor.down = false;
    await until(async () => (await refund.read()).status === 'succeeded', 'the refund to succeed', 600);
    const refundRun = stack.env.client.workflow.getHandle(refund.id);
    await until(async () => (await refundRun.describe()).status.name === 'COMPLETED', 'the refund workflow to end');
    const refundTasks = await workflowTasks(refund.id);
    expect(refundTasks.failed).toBe(0);
    expect(new Set(refundTasks.tasks)).toEqual(new Set([`${BUILD_A} PINNED`]));
    expect(new Set(vendor.refundsBy)).toEqual(new Set([BUILD_A]));

    // Nothing runs on A any more: the verdict follows our own count, and the server agrees soon after.
    status = await untilVerdict(q, BUILD_A, 'drained: safe to stop');
    expect(buildIn(status, BUILD_A)).toMatchObject({ status: 'drained', safe_to_stop: true, pinned_workflows: 0 });
    await until(
      async () => buildIn(await ops(q, 'release', 'status'), BUILD_A)?.server_drainage === 'drained',
      "the server's drainage status (dev server: refreshed every 5 s)",
      300,
    );
  });

  it('promote is a no-op for the current build and refuses a build no worker runs, a ramp of the current build and a ramp out of range', async () => {
    const q = stack.taskQueue;
    const current = (await ops(q, 'release', 'status')).current_build_id;
    expect(await ops(q, 'release', 'promote', '--build-id', current)).toMatchObject({
      build_id: current,
      previous_build_id: current,
      changed: false,
      message: `build ${current} is current already`,
    });
    expect(await ops(q, 'release', 'promote', '--build-id', 'build-nobody-runs', '--wait', '0')).toEqual({
      error: {
        code: 'build_not_polling',
        message:
          `no live worker of build build-nobody-runs (deployment ${q}) polls ${q} (workflow), ${q} (activity), ` +
          `${q}-webhooks (activity); start the workers of build build-nobody-runs first`,
      },
    });
    expect((await ops(q, 'release', 'promote', '--build-id', current, '--ramp', '10')).error.code).toBe(
      'already_current',
    );
    for (const ramp of ['0', '100', 'half']) {
      expect((await ops(q, 'release', 'promote', '--ramp', ramp)).error.code).toBe('invalid_flag');
    }
    expect((await ops(q, 'release', 'status')).current_build_id).toBe(current);
  });
});

/**
 * A connection to the stack's server on which the answer to a routing change is lost: the server
 * gets the call and applies it, the caller sees DEADLINE_EXCEEDED (as when the answer comes after
 * the call's deadline).
 */
async function connectionLosingRoutingAnswers() {
  const routing = /\/SetWorkerDeployment(CurrentVersion|RampingVersion)$/;
  const lost = { count: 0 };
  const loseAnswer: Interceptor = (options, nextCall) => {
    const routingCall = routing.test(options.method_definition.path);
    return new InterceptingCall(nextCall(options), {
      start(metadata, listener, next) {
        next(
          metadata,
          new ListenerBuilder()
            .withOnReceiveStatus((status, nextStatus) => {
              if (status.code !== grpcStatus.OK || !routingCall) return nextStatus(status);
              lost.count++;
              nextStatus({ ...status, code: grpcStatus.DEADLINE_EXCEEDED, details: 'the answer was lost (test)' });
            })
            .build(),
        );
      },
    });
  };
  const connection = await Connection.connect({ address: stack.temporalAddress!, interceptors: [loseAnswer] });
  return { connection, lost };
}

describe('a promotion whose answer is lost', () => {
  it('reads the deployment again and reports the change as its own; with no wait left it says the change may still land', async () => {
    const q = `lost-${randomString(8)}`;
    const target: ReleaseTarget = { namespace: 'default', deploymentName: q, taskQueue: q };
    await startWorker(q, { deploymentName: q, buildId: BUILD_A });
    expect(await promoteIfFresh(stack.env.nativeConnection, target, BUILD_A, 'test', 20_000)).toEqual({
      outcome: 'promoted',
    });
    await startWorker(q, { deploymentName: q, buildId: BUILD_B });
    await until(
      async () => livePollers(await ops(q, 'release', 'status'), BUILD_B).length === 3,
      `build ${BUILD_B}'s pollers on every queue`,
    );
    const { connection, lost } = await connectionLosingRoutingAnswers();
    try {
      expect(await promoteBuild(connection, target, { buildId: BUILD_B, waitMs: 20_000, identity: 'test' })).toEqual(
        promotedAToB(q),
      );
      expect(lost.count).toBe(1);
      expect((await describeDeployment(stack.env.nativeConnection, target))?.current).toBe(BUILD_B);

      // Back to A with no wait: the change lands, but the call cannot know it.
      const refused = await promoteBuild(connection, target, { buildId: BUILD_A, waitMs: 0, identity: 'test' }).catch(
        (err: unknown) => err,
      );
      expect(refused).toMatchObject({
        code: 'temporal_unavailable',
        message: expect.stringMatching(
          /^Temporal did not answer while promoting build build-a: .*the answer was lost \(test\); the change was sent and may still take effect: read `release status` before promoting again$/,
        ),
      });
      expect(lost.count).toBe(2);
      expect((await ops(q, 'release', 'status')).current_build_id).toBe(BUILD_A);
    } finally {
      await connection.close();
    }
  });
});

describe('from the unversioned release', () => {
  it('a new build does not promote itself while unversioned workers poll; once promoted, their running session moves to it and they may stop', async () => {
    const q = `legacy-${randomString(8)}`;
    const api = await apiOn(q);
    try {
      await startWorker(q, null);
      const session = await sessionAwaitingDecision(api);
      await untilIdle(session.id);
      const before = await workflowTasks(session.id);
      expect(before.failed).toBe(0);
      expect(new Set(before.tasks)).toEqual(new Set(['unversioned UNSPECIFIED']));

      await startWorker(q, { deploymentName: q, buildId: BUILD_B });
      const target: ReleaseTarget = { namespace: 'default', deploymentName: q, taskQueue: q };
      const own = await promoteIfFresh(stack.env.nativeConnection, target, BUILD_B, 'test', 20_000);
      expect(own).toMatchObject({ outcome: 'left_to_operator' });
      expect(own.reason).toMatch(/^unversioned workers poll the task queues \(.+\)$/);
      // Nothing current (or no deployment yet, had build B's version not registered by now).
      expect((await describeDeployment(stack.env.nativeConnection, target))?.current ?? null).toBeNull();

      let status: ReleaseStatus;
      await until(async () => {
        status = await ops(q, 'release', 'status');
        return livePollers(status, null).length === 3 && livePollers(status, BUILD_B).length === 3;
      }, 'the pollers of both on every queue');
      expect(status!.current_build_id).toBeNull();
      expect(buildIn(status!, null)).toMatchObject({
        status: 'current',
        verdict: 'current',
        safe_to_stop: false,
        running_workflows: 1,
        pinned_workflows: 0,
      });
      expect(livePollers(status!, null)).toEqual(queuesOf(q));
      expect(buildIn(status!, BUILD_B)).toMatchObject({ status: 'inactive' });

      expect(await ops(q, 'release', 'promote', '--build-id', BUILD_B)).toEqual({
        deployment: q,
        build_id: BUILD_B,
        previous_build_id: null,
        ramping_percentage: null,
        changed: true,
        message: `build ${BUILD_B} is now current (current before: the unversioned workers)`,
      });
      status = await ops(q, 'release', 'status');
      expect(status.current_build_id).toBe(BUILD_B);
      expect(buildIn(status, null)).toMatchObject({
        status: 'drained',
        verdict: `drained: safe to stop (1 unversioned workflow move to build ${BUILD_B} at their next task)`,
        safe_to_stop: true,
        running_workflows: 1,
      });

      await session.decide();
      await until(async () => (await session.read()).status === 'completed', 'the session to complete');
      const handle = stack.env.client.workflow.getHandle(session.id);
      await until(async () => (await handle.describe()).status.name === 'COMPLETED', 'the session workflow to end');
      const { tasks, failed } = await workflowTasks(session.id);
      expect(failed).toBe(0);
      expect(tasks.slice(0, before.tasks.length)).toEqual(before.tasks);
      expect(tasks.length).toBeGreaterThan(before.tasks.length);
      expect(new Set(tasks.slice(before.tasks.length))).toEqual(new Set([`${BUILD_B} AUTO_UPGRADE`]));
      expect(buildIn(await ops(q, 'release', 'status'), null)).toMatchObject({
        verdict: 'drained: safe to stop',
        running_workflows: 0,
      });
    } finally {
      await api.close();
    }
  });
});

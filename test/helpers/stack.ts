import { execFile } from 'node:child_process';
import { readFileSync, rmSync } from 'node:fs';
import { promisify } from 'node:util';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import type { AddressInfo } from 'node:net';
import { createServer, type Server } from 'node:http';
import { type Client as GrpcClient, status as grpcStatus } from '@grpc/grpc-js';
import type { Connection } from '@temporalio/client';
import { TestWorkflowEnvironment } from '@temporalio/testing';
import type { Logger, LogMetadata, WorkerDeploymentVersion } from '@temporalio/common';
import { DefaultLogger, Runtime, type Worker } from '@temporalio/worker';
import { createApp } from '../../src/app';
import type { Gateways } from '../../src/checkout/gateways';
import { AttemptStreamHub } from '../../src/checkout/attempts/attempt-stream-hub';
import type { AppDeps } from '../../src/deps';
import { loadSettings, Settings } from '../../src/config';
import { createDb, Db } from '../../src/db/knex';
import { HandoffRelay, startHandoffRelay } from '../../src/temporal/handoff-relay';
import { endedCall, isClosedChannelError } from '../../src/temporal/deadlines';
import { handoffsForgotten } from '../../src/temporal/handoffs';
import { registerSearchAttributes } from '../../src/temporal/search-attribute-setup';
import { setLogLevel } from '../../src/lib/log';
import { Dispatcher, startDispatcher } from '../../src/webhooks/fan-out';
import { listenForQueuedRows } from '../../src/webhooks/queue-announce';
import { webhookRuntime } from '../../src/webhooks/runtime';
import { createWorker } from '../../src/worker/create-worker';
import { promoteIfFresh } from '../../src/worker/deployment';
import { deploymentVersionOf } from '../../src/temporal/deployment';
import { startTemporalDevServer } from '../../scripts/temporal-dev-server';
import { testResolver } from './https-receiver';
import { RunEnv, runEnvFile } from './run-env';

const execFileAsync = promisify(execFile);

/** A clock tests can move forward; the app and activities read it. */
export interface TestClock {
  (): Date;
  /** Moves the clock forward (a frozen clock stays frozen at the new time). */
  advance(ms: number): void;
  /** Stops the clock at `at` (default: now) until `unfreeze`. */
  freeze(at?: Date): void;
  unfreeze(): void;
}

export function testClock(): TestClock {
  let offset = 0;
  let frozen: number | null = null;
  const clock = (() => new Date(frozen ?? Date.now() + offset)) as TestClock;
  clock.advance = (ms) => {
    if (frozen !== null) frozen += ms;
    else offset += ms;
  };
  clock.freeze = (at) => {
    frozen = (at ?? clock()).getTime();
  };
  clock.unfreeze = () => {
    if (frozen !== null) offset = frozen - Date.now();
    frozen = null;
  };
  return clock;
}

export interface Stack {
  baseUrl: string;
  /** The Temporal Web UI, when the stack runs on a dev server. */
  temporalUiUrl?: string;
  /** The dev server's (or cluster's) frontend, when the stack runs on one. */
  temporalAddress?: string;
  db: Db;
  env: TestWorkflowEnvironment;
  settings: Settings;
  clock: TestClock;
  taskQueue: string;
  /**
   * The Worker Deployment version of the stack's worker (deployment: the task queue's name; build:
   * TEMPORAL_BUILD_ID, else the release). The time-skipping server takes versioned pollers and
   * ignores their versions (it has no Worker Deployments); on a dev server a stack's build makes
   * itself current as a brand-new install's worker does.
   */
  deployment: WorkerDeploymentVersion | null;
  /** What the app was built from, for tests that mount probe routes on the same stacks. */
  deps: AppDeps;
  /**
   * Fans out this merchant's events to its webhook endpoints, through this stack's Temporal server.
   * Test files share one database, so each file's dispatcher takes only the merchants it was given.
   */
  dispatchEventsOf(merchantId: string): void;
  /**
   * Runs the workflow handoff relay (as the worker does) for this merchant's handoffs, through this
   * stack's Temporal server; like `dispatchEventsOf`, scoped to the merchants it was given.
   */
  relayHandoffsOf(merchantId: string): void;
  /** Stops and replaces the worker (to test crash recovery). */
  restartWorker(): Promise<void>;
  stop(): Promise<void>;
}

export function readRunEnv(): RunEnv {
  return JSON.parse(readFileSync(runEnvFile(), 'utf8')) as RunEnv;
}

/** In an error a test provokes on purpose (a vendor outage): the worker's warning about it is left out. */
export const EXPECTED_FAILURE = '(expected by the test)';

let runtimeInstalled = false;
/**
 * The SDK logs every worker state change at INFO; tests want only warnings, and not the one per
 * retry of an activity a test makes fail on purpose (a day of retries is 1,440 of them).
 */
function installQuietRuntime(): void {
  if (runtimeInstalled) return;
  runtimeInstalled = true;
  const warnings = new DefaultLogger('WARN');
  const expected = (meta?: LogMetadata) =>
    String((meta?.error as Error | undefined)?.message).includes(EXPECTED_FAILURE);
  const logger: Logger = {
    log: (level, message, meta) => {
      if (!expected(meta)) warnings.log(level, message, meta);
    },
    trace: (message, meta) => logger.log('TRACE', message, meta),
    debug: (message, meta) => logger.log('DEBUG', message, meta),
    info: (message, meta) => logger.log('INFO', message, meta),
    warn: (message, meta) => logger.log('WARN', message, meta),
    error: (message, meta) => logger.log('ERROR', message, meta),
  };
  Runtime.install({ logger });
}

/**
 * The SDK retries a failed call from a timer that `Connection.close()` does not clear; on the closed
 * channel the retry threw from that timer and failed whichever suite's teardown it landed in
 * ("Channel has been shut down"). The API's connection has `deadlineInterceptor`'s guard; the test
 * environment's, built by the SDK, gets the same answer here: a call on its closed channel ends CANCELLED.
 */
export function endCallsAfterClose(connection: Connection): void {
  const channel = (connection as unknown as { client: GrpcClient }).client.getChannel();
  const createCall = channel.createCall.bind(channel);
  channel.createCall = (...args) => {
    try {
      return createCall(...args);
    } catch (err) {
      if (!isClosedChannelError(err)) throw err;
      return endedCall(grpcStatus.CANCELLED, err.message);
    }
  };
}

export interface StackOptions {
  /** The time-skipping test server (default), or a real dev server for visibility queries and the Web UI (real time). */
  temporal?: 'time-skipping' | 'dev-server';
  /** With `dev-server`: the Web UI is needed, so a dev server of the stack's own even with TEMPORAL_MODE=cluster. */
  webUi?: boolean;
  /** The payment vendors of the stack's worker (default: the test gateway and cash on delivery). */
  gateways?: Gateways;
  /**
   * The host name of PUBLIC_BASE_URL (default 127.0.0.1; the server listens there either way):
   * `localhost` for passkeys, whose relying party id must be a domain name, never an IP address.
   */
  publicHost?: '127.0.0.1' | 'localhost';
}

/**
 * One test file's stack: the run's database, a time-skipping Temporal test server with the real
 * worker, and the real HTTP app on an ephemeral loopback port.
 */
export async function startStack(overrides: Record<string, string> = {}, options: StackOptions = {}): Promise<Stack> {
  const { temporal = 'time-skipping', gateways, publicHost = '127.0.0.1', webUi = false } = options;
  setLogLevel((process.env.TEST_LOG_LEVEL as 'debug') ?? 'silent');
  installQuietRuntime();
  const run = readRunEnv();
  const db = createDb(run.databaseUrl, 8);
  const devServer = temporal === 'dev-server' ? await startTestDevServer({ webUi }) : undefined;
  const env = devServer
    ? await TestWorkflowEnvironment.createFromExistingServer({
        address: devServer.address,
        namespace: devServer.namespace,
      })
    : await TestWorkflowEnvironment.createTimeSkipping({
        server: { executable: { type: 'existing-path', path: run.testServerPath } },
      });
  endCallsAfterClose(env.connection);
  if (!devServer) await registerSearchAttributes(env.connection, env.namespace ?? 'default');
  const clock = testClock();
  const syncClock = async () => {
    const behind = (await env.currentTimeMs()) - clock().getTime();
    if (behind > 0) clock.advance(behind);
  };
  // The app clock moves with the test server's time: every `env.sleep` (and awaited workflow result)
  // that skips time moves it forward as far. Sessions and attempts record their deadlines on the app
  // clock and the workflows time them on Temporal's, so the two must not drift apart (a skip left
  // behind makes later sessions expire at once in workflow time).
  if (!devServer) {
    const skip = env.sleep;
    env.sleep = async (duration) => {
      await skip(duration);
      await syncClock();
    };
    // Awaiting a result skips time too.
    const workflows = env.client.workflow;
    const result = workflows.result.bind(workflows);
    workflows.result = async (...args) => {
      try {
        return await result(...args);
      } finally {
        await syncClock();
      }
    };
    await syncClock();
  }
  // Listen first, so PUBLIC_BASE_URL (session urls, hosted pages) is the address tests can open.
  const server = createServer();
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const baseUrl = `http://${publicHost}:${(server.address() as AddressInfo).port}`;
  const settings = loadSettings({
    DATABASE_URL: run.databaseUrl,
    PORT: '0',
    LOG_LEVEL: 'silent',
    PUBLIC_BASE_URL: baseUrl,
    // Tests play the proxy in front: each shopper's X-Forwarded-For is its client IP.
    TRUST_PROXY: '1',
    ...overrides,
  });
  const taskQueue = `test-${Math.random().toString(36).slice(2)}`;
  const webhooks = webhookRuntime(settings, { resolve: testResolver });
  const queueNotices = listenForQueuedRows(run.databaseUrl);

  const deployment = deploymentVersionOf({ ...settings, TEMPORAL_TASK_QUEUE: taskQueue });
  const startWorker = async () => {
    const worker: Worker = await createWorker({
      connection: env.nativeConnection,
      namespace: env.namespace ?? 'default',
      taskQueue,
      db,
      clock,
      publicBaseUrl: settings.PUBLIC_BASE_URL,
      webhooks,
      queueNotices,
      workflowBundle: { codePath: run.workflowBundlePath },
      deployment,
      gateways,
    });
    const running = worker.run();
    if (devServer && deployment) {
      const target = { namespace: env.namespace ?? 'default', deploymentName: deployment.deploymentName, taskQueue };
      await promoteIfFresh(env.nativeConnection, target, deployment.buildId, worker.options.identity);
    }
    return { worker, running };
  };
  let current = await startWorker();
  const stopWorker = async () => {
    current.worker.shutdown();
    await current.running;
  };

  const deps: AppDeps = {
    db,
    settings: { ...settings, TEMPORAL_TASK_QUEUE: taskQueue },
    clock,
    temporal: env.client,
    webhooks,
    attemptStreams: new AttemptStreamHub({ db }),
  };
  server.on('request', createApp(deps).callback());
  const webhookMerchants = new Set<string>();
  let dispatcher: Dispatcher | undefined;
  const handoffMerchants = new Set<string>();
  let handoffRelay: HandoffRelay | undefined;

  return {
    baseUrl,
    temporalUiUrl: devServer?.uiUrl,
    temporalAddress: devServer?.address,
    db,
    env,
    settings,
    clock,
    taskQueue,
    deployment,
    deps,
    dispatchEventsOf(merchantId) {
      webhookMerchants.add(merchantId);
      dispatcher ??= startDispatcher({
        db,
        databaseUrl: run.databaseUrl,
        temporal: env.client,
        taskQueue,
        merchantIds: webhookMerchants,
        sweepEveryMs: 500,
      });
    },
    relayHandoffsOf(merchantId) {
      handoffMerchants.add(merchantId);
      handoffRelay ??= startHandoffRelay({
        db,
        temporal: env.client,
        taskQueue,
        clock,
        merchantIds: handoffMerchants,
        pollEveryMs: 250,
      });
    },
    async restartWorker() {
      await stopWorker();
      current = await startWorker();
    },
    async stop() {
      deps.attemptStreams!.drainStreams();
      await new Promise<void>((resolve) => server.close(() => resolve()));
      await deps.attemptStreams!.close();
      await dispatcher?.stop();
      await handoffRelay?.stop();
      await stopWorker();
      await queueNotices.stop();
      await env.teardown();
      await devServer?.stop();
      await handoffsForgotten(db);
      await db.destroy();
    },
  };
}

/**
 * A `temporal server start-dev` of the test's own (loopback, free ports, the custom search
 * attributes registered unless `searchAttributes: false`, a throwaway SQLite file), for what the
 * time-skipping server lacks: visibility queries and the Web UI. Time is real there.
 * With TEMPORAL_MODE=cluster the run's cluster instead: its `default` namespace, or with
 * `searchAttributes: false` a new namespace without them; `stop` leaves it running. The cluster
 * has no Web UI: `webUi: true` asks for a dev server even then.
 */
export async function startTestDevServer(
  options: { searchAttributes?: boolean; webUi?: boolean } = {},
): Promise<{ address: string; namespace: string; uiUrl?: string; stop(): Promise<void> }> {
  const run = readRunEnv();
  if (run.temporalCluster && !options.webUi) {
    const { address } = run.temporalCluster;
    if (options.searchAttributes !== false) return { address, namespace: 'default', stop: async () => undefined };
    const namespace = `test-${process.pid}-${Date.now()}`;
    await createNamespace(run.temporalCliPath, address, namespace);
    return { address, namespace, stop: async () => undefined };
  }
  const dbFile = join(tmpdir(), `svc-test-temporal-${process.pid}-${Date.now()}.db`);
  const server = await startTemporalDevServer({
    cli: run.temporalCliPath,
    dbFile,
    namespace: 'default',
    logFile: `${dbFile}.log`,
    timeoutMs: 120_000,
    searchAttributes: options.searchAttributes,
  });
  return {
    address: server.address,
    namespace: 'default',
    uiUrl: server.uiUrl,
    async stop() {
      await server.child.stop();
      for (const path of [dbFile, `${dbFile}-wal`, `${dbFile}-shm`, `${dbFile}.log`]) rmSync(path, { force: true });
    },
  };
}

/**
 * Creates `namespace` on the cluster with the CLI, and waits until the frontend serves it: until
 * its namespace cache has it, which the search-attribute list goes through (`describe` reads the
 * database and finds it before).
 */
async function createNamespace(cli: string, address: string, namespace: string): Promise<void> {
  const run = (args: string[]) =>
    execFileAsync(cli, [...args, '--namespace', namespace, '--address', address], { timeout: 30_000 });
  await run(['operator', 'namespace', 'create', '--retention', '24h']);
  for (let tries = 0; ; tries++) {
    if (
      await run(['operator', 'search-attribute', 'list']).then(
        () => true,
        () => false,
      )
    )
      return;
    if (tries > 60) throw new Error(`namespace ${namespace} not served by ${address} after a minute`);
    await new Promise((r) => setTimeout(r, 1000));
  }
}

/** Serves a Koa app on an ephemeral loopback port; returns its base URL and a closer. */
export async function listen(app: { listen: (port: number, host: string, cb: () => void) => Server }) {
  const server: Server = await new Promise((resolve) => {
    const s = app.listen(0, '127.0.0.1', () => resolve(s));
  });
  const { port } = server.address() as AddressInfo;
  return {
    baseUrl: `http://127.0.0.1:${port}`,
    close: () => new Promise<void>((resolve) => server.close(() => resolve())),
  };
}

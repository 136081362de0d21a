import { readFileSync } from 'node:fs';
import type { AddressInfo } from 'node:net';
import { createServer, type Server } from 'node:http';
import { TestWorkflowEnvironment } from '@temporalio/testing';
import { DefaultLogger, Runtime, type Worker } from '@temporalio/worker';
import { AppDeps, createApp } from '../../src/app';
import { loadSettings, Settings } from '../../src/config';
import { createDb, Db } from '../../src/db/knex';
import { setLogLevel } from '../../src/lib/log';
import { Dispatcher, startDispatcher } from '../../src/webhooks/dispatcher';
import { webhookRuntime } from '../../src/webhooks/runtime';
import { createWorker } from '../../src/worker/create-worker';
import { testResolver } from './https-receiver';
import { RunEnv, runEnvFile } from './run-env';

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
  db: Db;
  env: TestWorkflowEnvironment;
  settings: Settings;
  clock: TestClock;
  taskQueue: string;
  /** What the app was built from, for tests that mount probe routes on the same stacks. */
  deps: AppDeps;
  /**
   * Fans out this merchant's events to its webhook endpoints, through this stack's Temporal server.
   * Test files share one database, so each file's dispatcher takes only the merchants it was given.
   */
  dispatchEventsOf(merchantId: string): void;
  /** Stops and replaces the worker (to test crash recovery). */
  restartWorker(): Promise<void>;
  stop(): Promise<void>;
}

export function readRunEnv(): RunEnv {
  return JSON.parse(readFileSync(runEnvFile(), 'utf8')) as RunEnv;
}

let runtimeInstalled = false;
/** The SDK logs every worker state change at INFO; tests want only warnings. */
function installQuietRuntime(): void {
  if (runtimeInstalled) return;
  runtimeInstalled = true;
  Runtime.install({ logger: new DefaultLogger('WARN') });
}

/**
 * One test file's stack: the run's database, a time-skipping Temporal test server with the real
 * worker, and the real HTTP app on an ephemeral loopback port.
 */
export async function startStack(overrides: Record<string, string> = {}): Promise<Stack> {
  setLogLevel((process.env.TEST_LOG_LEVEL as 'debug') ?? 'silent');
  installQuietRuntime();
  const run = readRunEnv();
  const db = createDb(run.databaseUrl, 8);
  const env = await TestWorkflowEnvironment.createTimeSkipping({
    server: { executable: { type: 'existing-path', path: run.testServerPath } },
  });
  const clock = testClock();
  // Listen first, so PUBLIC_BASE_URL (session urls, hosted pages) is the address tests can open.
  const server = createServer();
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const baseUrl = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
  const settings = loadSettings({
    DATABASE_URL: run.databaseUrl,
    PORT: '0',
    LOG_LEVEL: 'silent',
    PUBLIC_BASE_URL: baseUrl,
    ...overrides,
  });
  const taskQueue = `test-${Math.random().toString(36).slice(2)}`;
  const webhooks = webhookRuntime(settings, { resolve: testResolver });

  const startWorker = async () => {
    const worker: Worker = await createWorker({
      connection: env.nativeConnection,
      namespace: env.namespace ?? 'default',
      taskQueue,
      db,
      clock,
      publicBaseUrl: settings.PUBLIC_BASE_URL,
      webhooks,
      workflowBundle: { codePath: run.workflowBundlePath },
    });
    return { worker, running: worker.run() };
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
  };
  server.on('request', createApp(deps).callback());
  const webhookMerchants = new Set<string>();
  let dispatcher: Dispatcher | undefined;

  return {
    baseUrl,
    db,
    env,
    settings,
    clock,
    taskQueue,
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
    async restartWorker() {
      await stopWorker();
      current = await startWorker();
    },
    async stop() {
      await new Promise<void>((resolve) => server.close(() => resolve()));
      await dispatcher?.stop();
      await stopWorker();
      await env.teardown();
      await db.destroy();
    },
  };
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

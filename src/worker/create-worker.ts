import { resolve } from 'node:path';
import type { WorkerDeploymentVersion } from '@temporalio/common';
import { NativeConnection, Worker, WorkerOptions } from '@temporalio/worker';
import { createActivities } from '../../activities';
import { createDeliveryActivities } from '../../activities/delivery';
import { loadSettings } from '../config';
import { workerTracingOptions } from '../telemetry/temporal';
import type { Db } from '../db/knex';
import type { Gateways } from '../checkout/gateways';
import type { Clock } from '../lib/clock';
import { webhookActivityQueue } from '../temporal/delivery';
import { deploymentVersionOf } from '../temporal/deployment';
import type { QueueNotices } from '../webhooks/queue-announce';
import { WebhookRuntime, webhookRuntime } from '../webhooks/runtime';
import { workerStopOptions } from './stop';
import { workerDeploymentOptions } from './deployment';

/**
 * Slots of the main task queue: workflow tasks of every workflow, and the short activities of
 * sessions, attempts, refunds and the janitor (each one or two Postgres transactions).
 */
export const MAIN_SLOTS = { workflowTasks: 40, activities: 40 } as const;

export interface WorkerDeps {
  connection: NativeConnection;
  namespace: string;
  taskQueue: string;
  db: Db;
  clock: Clock;
  publicBaseUrl: string;
  /** Webhook delivery dependencies; built from the environment's settings when absent. */
  webhooks?: WebhookRuntime;
  /** Webhook delivery activities run at once on `<taskQueue>-webhooks` (default WEBHOOK_ACTIVITY_SLOTS; 0: no webhook worker). */
  webhookSlots?: number;
  /** The LISTEN on queued webhook rows (`listenForQueuedRows`): delivery activities wait on it for new rows. */
  queueNotices?: QueueNotices;
  /** Aborted when the process stops: activities then take no new work (`deliverDue` claims no more rows). */
  stopping?: AbortSignal;
  /** A prebuilt workflow bundle (tests build it once); otherwise the workflows are bundled now. */
  workflowBundle?: { codePath: string } | { code: string };
  /**
   * The Worker Deployment version both Worker instances declare; null: unversioned. Absent: from
   * the settings (TEMPORAL_DEPLOYMENT_NAME, else `taskQueue`; TEMPORAL_BUILD_ID, else the release).
   */
  deployment?: WorkerDeploymentVersion | null;
  /** The payment vendors (default: the test gateway and cash on delivery). */
  gateways?: Gateways;
}

/**
 * The worker of this process: every workflow in `workflows/` and every activity in `activities/`
 * on the main task queue, and beside it, on `<taskQueue>-webhooks` with slots of its own, the
 * webhook delivery activities of `endpointDeliveryWorkflow` (slow receivers never take the slots
 * that expiry and settlement need). The old `deliveryWorkflow` type still finds its activities on
 * the main queue. Both declare one Worker Deployment version, so a build serves both queues or
 * neither. `run()` runs both until `shutdown()` stops both.
 */
export async function createWorker(deps: WorkerDeps): Promise<Worker> {
  const settings = loadSettings();
  const webhooks = deps.webhooks ?? webhookRuntime(settings);
  const activityDeps = {
    db: deps.db,
    clock: deps.clock,
    publicBaseUrl: deps.publicBaseUrl,
    webhooks,
    queueNotices: deps.queueNotices,
    stopping: deps.stopping,
    gateways: deps.gateways,
  };
  const version =
    deps.deployment === undefined
      ? deploymentVersionOf({ ...settings, TEMPORAL_TASK_QUEUE: deps.taskQueue })
      : deps.deployment;
  if (!version && deps.workflowBundle) {
    throw new Error(
      'an unversioned worker bundles its own workflows: a prebuilt bundle declares versioning behaviours',
    );
  }
  const workflows: Pick<WorkerOptions, 'workflowBundle' | 'workflowsPath' | 'bundlerOptions'> = deps.workflowBundle
    ? { workflowBundle: deps.workflowBundle }
    : { workflowsPath: require.resolve('../../workflows'), ...(version ? {} : unversionedBundle) };
  const versioning = workerDeploymentOptions(version);
  const { interceptors, sinks } = workerTracingOptions();
  const activityInterceptors = { activity: interceptors?.activity };
  const main = await Worker.create({
    connection: deps.connection,
    namespace: deps.namespace,
    taskQueue: deps.taskQueue,
    activities: createActivities(activityDeps),
    maxConcurrentWorkflowTaskExecutions: MAIN_SLOTS.workflowTasks,
    maxConcurrentActivityTaskExecutions: MAIN_SLOTS.activities,
    ...workerStopOptions(settings),
    ...workflows,
    // A prebuilt bundle has the workflow interceptors in it already (the SDK warns if named again).
    interceptors: deps.workflowBundle ? activityInterceptors : interceptors,
    sinks,
    ...versioning,
  });
  const webhookSlots = deps.webhookSlots ?? settings.WEBHOOK_ACTIVITY_SLOTS;
  if (webhookSlots === 0) return main;
  const delivery = await Worker.create({
    connection: deps.connection,
    namespace: deps.namespace,
    taskQueue: webhookActivityQueue(deps.taskQueue),
    activities: createDeliveryActivities({ ...activityDeps, activitySlots: webhookSlots }),
    maxConcurrentActivityTaskExecutions: webhookSlots,
    ...workerStopOptions(settings),
    interceptors: activityInterceptors,
    ...versioning,
  });
  return runTogether(main, delivery);
}

/**
 * The bundle of an unversioned worker: `src/temporal/versioning.ts` swapped for a table declaring
 * no behaviour, as a server refuses a workflow task that an unversioned worker completes with one.
 */
const unversionedBundle: Pick<WorkerOptions, 'bundlerOptions'> = {
  bundlerOptions: {
    webpackConfigHook: (config) => ({
      ...config,
      resolve: {
        ...config.resolve,
        alias: {
          ...(config.resolve?.alias as Record<string, string> | undefined),
          [resolve(__dirname, '../temporal/versioning.ts')]: resolve(
            __dirname,
            '../temporal/versioning-unversioned.ts',
          ),
        },
      },
    }),
  },
};

/** `main`, whose `run()` also runs `companion` (and stops it when either stops) and whose `shutdown()` stops both. */
function runTogether(main: Worker, companion: Worker): Worker {
  const run = main.run.bind(main);
  const shutdown = main.shutdown.bind(main);
  const stopBoth = () => {
    if (main.getState() === 'RUNNING') shutdown();
    if (companion.getState() === 'RUNNING') companion.shutdown();
  };
  return Object.assign(main, {
    run: async () => {
      const runs = [run(), companion.run()].map((p) => p.finally(stopBoth));
      await Promise.all(runs);
    },
    shutdown: stopBoth,
  });
}

import type { Client } from '@temporalio/client';
import { NativeConnection, Worker, WorkerOptions } from '@temporalio/worker';
import { WorkflowIdConflictPolicy } from '@temporalio/common';
import { createActivities } from '../../activities';
import { loadSettings } from '../config';
import type { Db } from '../db/knex';
import type { Clock } from '../lib/clock';
import { janitorWorkflowId } from '../temporal/names';
import { WebhookRuntime, webhookRuntime } from '../webhooks/runtime';

export interface WorkerDeps {
  connection: NativeConnection;
  namespace: string;
  taskQueue: string;
  db: Db;
  clock: Clock;
  publicBaseUrl: string;
  /** Webhook delivery dependencies; built from the environment's settings when absent. */
  webhooks?: WebhookRuntime;
  /** A prebuilt workflow bundle (tests build it once); otherwise the workflows are bundled now. */
  workflowBundle?: { codePath: string } | { code: string };
}

/** The worker that runs every workflow in `workflows/` and every activity in `activities/`. */
export function createWorker(deps: WorkerDeps): Promise<Worker> {
  const workflows: Pick<WorkerOptions, 'workflowBundle' | 'workflowsPath'> = deps.workflowBundle
    ? { workflowBundle: deps.workflowBundle }
    : { workflowsPath: require.resolve('../../workflows') };
  return Worker.create({
    connection: deps.connection,
    namespace: deps.namespace,
    taskQueue: deps.taskQueue,
    activities: createActivities({
      db: deps.db,
      clock: deps.clock,
      publicBaseUrl: deps.publicBaseUrl,
      webhooks: deps.webhooks ?? webhookRuntime(loadSettings()),
    }),
    ...workflows,
  });
}

/** Starts the janitor unless it already runs (idempotent; safe from every worker copy). */
export async function ensureJanitor(client: Client, taskQueue: string): Promise<void> {
  await client.workflow.start('janitorWorkflow', {
    workflowId: janitorWorkflowId,
    taskQueue,
    workflowIdConflictPolicy: WorkflowIdConflictPolicy.USE_EXISTING,
  });
}

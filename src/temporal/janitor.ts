/**
 * The janitor workflow's contract: one long-lived run (id `janitor`) that sweeps retention hourly,
 * its schedule, and the only helper that starts it.
 */
import type { Client } from '@temporalio/client';
import { WorkflowIdConflictPolicy } from '@temporalio/common';
import type { janitorWorkflow } from '../../workflows/janitor';

const workflowType = 'janitorWorkflow';

/** The single long-lived janitor workflow. */
export const janitorWorkflowId = 'janitor';

/** How often the janitor sweeps, and how long purged records are kept. */
export const janitorSchedule = {
  every: '1 hour',
  idempotencyRetentionMs: 24 * 60 * 60 * 1000,
  rateLimitRetentionMs: 24 * 60 * 60 * 1000,
  /** An SMS body is an OTP code, dead after 10 minutes. */
  smsBodyRetentionMs: 10 * 60 * 1000,
  outboxRetentionMs: 30 * 24 * 60 * 60 * 1000,
  /** Continue-as-new after this many sweeps, as the test server never suggests it. */
  sweepsPerRun: 200,
} as const;

/** Starts the janitor unless it already runs (idempotent; safe from every worker copy). */
export async function ensureJanitor(client: Client, taskQueue: string): Promise<void> {
  await client.workflow.start<typeof janitorWorkflow>(workflowType, {
    workflowId: janitorWorkflowId,
    taskQueue,
    workflowIdConflictPolicy: WorkflowIdConflictPolicy.USE_EXISTING,
    staticSummary: `retention sweep every ${janitorSchedule.every} (idempotency keys, rate-limit windows, events, outbox, SMS bodies)`,
  });
}

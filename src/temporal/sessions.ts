import type { Client } from '@temporalio/client';
import { WorkflowIdConflictPolicy } from '@temporalio/common';
import { log } from '../lib/log';
import { sessionSettledSignal, SessionWorkflowInput } from './session-messages';

/** Starts the session's workflow unless it already runs (the id is the session id, so this is idempotent). */
export async function startSessionWorkflow(
  client: Client,
  taskQueue: string,
  input: SessionWorkflowInput,
): Promise<void> {
  await client.workflow.start('sessionWorkflow', {
    workflowId: input.sessionId,
    taskQueue,
    args: [input],
    workflowIdConflictPolicy: WorkflowIdConflictPolicy.USE_EXISTING,
  });
}

/**
 * Tells the session's workflow it is settled so its timer stops early. Best effort: Postgres has
 * already decided, and a workflow that misses this finds the session settled when its timer fires.
 */
export async function signalSessionSettled(
  client: Client,
  sessionId: string,
  status: string,
  by: string,
): Promise<void> {
  try {
    await client.workflow.getHandle(sessionId).signal(sessionSettledSignal, { status, by });
  } catch (err) {
    log.warn('could not signal session workflow', {
      session_id: sessionId,
      error: err instanceof Error ? err.message : String(err),
    });
  }
}

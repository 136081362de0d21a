import { Client, WorkflowExecutionAlreadyStartedError } from '@temporalio/client';
import { WorkflowIdConflictPolicy, WorkflowIdReusePolicy } from '@temporalio/common';
import { log } from '../lib/log';
import {
  AttemptStart,
  attemptStartedSignal,
  RefundWorkflowInput,
  sessionSettledSignal,
  SessionWorkflowInput,
} from './session-messages';

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

/**
 * Hands a new attempt to the session's workflow, starting the workflow if it is somehow gone (with
 * the time left until `expires_at`), so no attempt is ever without the process that settles it.
 */
export async function signalAttemptStarted(
  client: Client,
  taskQueue: string,
  session: SessionWorkflowInput,
  attempt: AttemptStart,
): Promise<void> {
  await client.workflow.signalWithStart('sessionWorkflow', {
    workflowId: session.sessionId,
    taskQueue,
    args: [session],
    signal: attemptStartedSignal,
    signalArgs: [attempt],
  });
}

/** Starts the refund's workflow (id = refund id); starting it again, even after it ended, is a no-op. */
export async function startRefundWorkflow(
  client: Client,
  taskQueue: string,
  input: RefundWorkflowInput,
): Promise<void> {
  try {
    await client.workflow.start('refundWorkflow', {
      workflowId: input.refundId,
      taskQueue,
      args: [input],
      workflowIdConflictPolicy: WorkflowIdConflictPolicy.USE_EXISTING,
      workflowIdReusePolicy: WorkflowIdReusePolicy.REJECT_DUPLICATE,
    });
  } catch (err) {
    if (!(err instanceof WorkflowExecutionAlreadyStartedError)) throw err;
  }
}

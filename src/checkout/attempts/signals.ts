import type { Client } from '@temporalio/client';
import { log } from '../../lib/log';
import {
  attemptDecisionSignal,
  attemptResolvedSignal,
  attemptVerifySignal,
  TestGatewayDecision,
} from '../../temporal/session-messages';

/** Passes a test-gateway button to the session workflow running the attempt. */
export async function signalDecision(
  client: Client,
  sessionId: string,
  attemptId: string,
  decision: TestGatewayDecision,
): Promise<void> {
  await client.workflow.getHandle(sessionId).signal(attemptDecisionSignal, { attemptId, decision });
}

/** Asks the session workflow to let the amount rule decide (the shopper came back without a button). */
export async function signalVerify(client: Client, sessionId: string, attemptId: string): Promise<void> {
  await client.workflow.getHandle(sessionId).signal(attemptVerifySignal, { attemptId });
}

/**
 * Tells the session workflow an attempt was settled outside it. Best effort: Postgres has decided,
 * and a workflow that misses this finds the attempt settled when it next acts on it.
 */
export async function signalAttemptResolved(
  client: Client,
  sessionId: string,
  attemptId: string,
  status: string,
): Promise<void> {
  try {
    await client.workflow.getHandle(sessionId).signal(attemptResolvedSignal, { attemptId, status });
  } catch (err) {
    log.warn('could not signal session workflow', {
      session_id: sessionId,
      attempt_id: attemptId,
      error: err instanceof Error ? err.message : String(err),
    });
  }
}

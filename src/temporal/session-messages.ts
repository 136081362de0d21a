import { defineSignal } from '@temporalio/workflow';

/** Input of the session workflow (workflow id = session id). */
export interface SessionWorkflowInput {
  sessionId: string;
  /** Time left until `expires_at` when the workflow was started; the timer runs on workflow time. */
  expiresInMs: number;
}

/** A session left `open` by another path (API `/expire`, reconciliation, completion): stop the timer. */
export const sessionSettledSignal = defineSignal<[{ status: string; by: string }]>('sessionSettled');

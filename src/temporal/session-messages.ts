import { defineSignal } from '@temporalio/workflow';

/** Input of the session workflow (workflow id = session id). */
export interface SessionWorkflowInput {
  sessionId: string;
  /** Time left until `expires_at` when the workflow was started; the timer runs on workflow time. */
  expiresInMs: number;
}

/** A session left `open` by another path (API `/expire`, reconciliation, completion): stop the timer. */
export const sessionSettledSignal = defineSignal<[{ status: string; by: string }]>('sessionSettled');

/** A payment attempt the session workflow runs until it resolves. */
export interface AttemptStart {
  attemptId: string;
  /** The simulated vendor: buttons and the amount rule decide. */
  testGateway: boolean;
  /** The amount the attempt presents (the amount rule reads its last three digits). */
  presentedAmount: number;
}

/** An attempt went to the vendor: the session reads `processing` until the workflow settles it. */
export const attemptStartedSignal = defineSignal<[AttemptStart]>('attemptStarted');

export type TestGatewayDecision = 'succeeded' | 'failed' | 'canceled' | 'slow';

/** A button on the test gateway's page. */
export const attemptDecisionSignal =
  defineSignal<[{ attemptId: string; decision: TestGatewayDecision }]>('attemptDecision');

/** The shopper came back without a button and the return page asked to verify: the amount rule decides. */
export const attemptVerifySignal = defineSignal<[{ attemptId: string }]>('attemptVerify');

/** The attempt was settled outside the workflow (its initiation failed): stop running it. */
export const attemptResolvedSignal = defineSignal<[{ attemptId: string; status: string }]>('attemptResolved');

/** Input of the refund workflow (workflow id = refund id). */
export interface RefundWorkflowInput {
  refundId: string;
}

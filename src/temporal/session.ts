/**
 * The session workflow's contract (workflow id = session id): its input, signals, schedule and the
 * only helpers that start or signal it. The workflow (`workflows/session.ts`) imports this module
 * too, so it holds nothing a workflow cannot load: the client is a type, never a value.
 */
import type { Client } from '@temporalio/client';
import { WorkflowIdConflictPolicy, WorkflowNotFoundError } from '@temporalio/common';
import { defineSignal, defineUpdate } from '@temporalio/workflow';
import type { sessionWorkflow } from '../../workflows/session';
import { merchantIdKey, modeKey, referenceIdKey, sessionStatusKey } from './search-attributes';

const workflowType = 'sessionWorkflow';

/** The session's workflow id: the session id itself, so a session has one workflow. */
export const sessionWorkflowId = (sessionId: string): string => sessionId;

/** What a continued-as-new run carries over from the run before it. */
export interface SessionCarriedState {
  /** A status another path settled the session at (`sessionSettled`), not yet acted on. */
  settled: string | null;
  /** The `SessionStatus` search attribute as last set. */
  shownStatus: string;
  /** Attempts handed over and not run yet, with their recorded start. */
  queue: Array<AttemptStart & { startedAtMs: number }>;
  /** Every attempt id ever handed over (a repeated hand-over is ignored). */
  known: string[];
  decisions: Array<[string, TestGatewayDecision]>;
  verified: string[];
  resolved: string[];
  /** Fast-forwarded starts of attempts not handed over yet (absent in runs from before fast-forward). */
  movedStarts?: Array<[string, number]>;
}

/** Input of the session workflow (workflow id = session id). Fields only grow: old runs lack the newer ones. */
export interface SessionWorkflowInput {
  sessionId: string;
  /**
   * Time left until `expires_at` when the workflow was started. Runs started before `expiresAtMs`
   * existed count it from their first workflow task; newer runs read `expiresAtMs` instead.
   */
  expiresInMs: number;
  /** The session's `expires_at` (epoch ms, from Postgres): every session timer derives from it. */
  expiresAtMs?: number;
  /** Continue as new once the history has this many events (default `sessionSchedule.historyBound`). */
  historyBound?: number;
  /** The state a continued-as-new run carries; absent on the first run. */
  carried?: SessionCarriedState;
}

/** A session left `open` by another path (API `/expire`, reconciliation, completion): stop the timer. */
export const sessionSettledSignal = defineSignal<[{ status: string; by: string }]>('sessionSettled');

/** A payment attempt the session workflow runs until it resolves. */
export interface AttemptStart {
  attemptId: string;
  /** The simulated vendor: buttons and the amount rule decide (only for it). */
  testGateway: boolean;
  /** The amount the attempt presents (the amount rule reads its last three digits). */
  presentedAmount: number;
  /**
   * The attempt's recorded start (`payment_attempts.created_at`, epoch ms): its 24 hours count from
   * here. Hand-overs sent before this field existed are timed from when the workflow adopted them.
   */
  startedAtMs?: number;
}

/** An attempt went to the vendor: the session reads `processing` until the workflow settles it. */
export const attemptStartedSignal = defineSignal<[AttemptStart]>('attemptStarted');

export type TestGatewayDecision = 'succeeded' | 'failed' | 'canceled' | 'slow';

/** A button on the test gateway's page. */
export const attemptDecisionSignal =
  defineSignal<[{ attemptId: string; decision: TestGatewayDecision }]>('attemptDecision');

/** What the session workflow answers a button with: the attempt's status once it is known. */
export interface DecisionAnswer {
  /**
   * `succeeded`, `failed` or `canceled` once settled; `pending` when the outcome is not immediate
   * (the slow button, amount rules 002 and 003) or the run ended before it was known.
   */
  attemptStatus: string;
}

/**
 * A button on the test gateway's page, as an Update: the workflow records the decision as the
 * signal does, and answers once it settled the attempt (or knows it will not at once), so the API
 * returns the outcome in the same call. The decision's handoff (the signal) stays the fallback.
 */
export const attemptDecisionUpdate = defineUpdate<
  DecisionAnswer,
  [{ attemptId: string; decision: TestGatewayDecision }]
>('attemptDecide');

/** The shopper came back without a button and the return page asked to verify: the amount rule decides. */
export const attemptVerifySignal = defineSignal<[{ attemptId: string }]>('attemptVerify');

/** The attempt was settled outside the workflow (its initiation failed): stop running it. */
export const attemptResolvedSignal = defineSignal<[{ attemptId: string; status: string }]>('attemptResolved');

/**
 * Test mode's fast-forward moved the session's deadlines earlier: its `expires_at` and, for the
 * attempt pending then, the start its clocks count from. Absolute times as Postgres now holds
 * them, so a repeated or late delivery changes nothing (the workflow keeps the earliest).
 */
export interface FastForward {
  expiresAtMs: number;
  attempt?: { attemptId: string; startedAtMs: number };
}

/** Deadlines moved by a fast-forward: the workflow re-arms its timers from them. */
export const sessionFastForwardedSignal = defineSignal<[FastForward]>('sessionFastForwarded');

/**
 * Every timing of a payment attempt, in milliseconds, shared by the session workflow and the
 * tests that assert it: data, not code.
 */
export const attemptSchedule = {
  /** The test gateway's slow button: no answer for this long, then the amount rule decides. */
  slowAnswerMs: 90 * 1000,
  /** Amount rule `…003`: pending this long after the vendor was asked, then succeeds. */
  delayedSuccessMs: 30 * 1000,
  /**
   * Amount rule `…002`: the attempt is re-checked at the vendor after each of these delays in turn
   * (the last one repeats) until it times out.
   */
  recheckBackoffMs: [30, 60, 120, 300, 600, 1800, 3600].map((s) => s * 1000),
  /** An attempt with no outcome this long after it began (its recorded start) fails with `timeout`. */
  timeoutMs: 24 * 60 * 60 * 1000,
} as const;

/** The session workflow's own bounds. */
export const sessionSchedule = {
  /**
   * Continue as new past this many history events (Temporal's hard limit is 50,000; the worst
   * abuse case, 10 attempts every 10 minutes for 24 hours, makes about 14,000).
   */
  historyBound: 2000,
  /** Past `expires_at` with the session still `processing`, look again this often for the hand-over. */
  handoverWaitMs: 60 * 1000,
} as const;

/** The delays of the re-checks of an attempt that stays pending from `elapsedMs` after it began until it times out. */
export function recheckDelays(elapsedMs: number): number[] {
  const delays: number[] = [];
  let at = elapsedMs;
  for (let i = 0; at < attemptSchedule.timeoutMs; i++) {
    const backoff = attemptSchedule.recheckBackoffMs;
    const delay = Math.min(backoff[Math.min(i, backoff.length - 1)], attemptSchedule.timeoutMs - at);
    delays.push(delay);
    at += delay;
  }
  return delays;
}

/** What starting a session's workflow needs: its deadline, and what an operator sees in the Temporal UI. */
export interface SessionStart {
  sessionId: string;
  /** `expires_at` as recorded in Postgres, epoch ms. */
  expiresAtMs: number;
  merchantId: string;
  /** The merchant's display name, for the workflow's summary (omitted when the caller has none). */
  merchantName?: string;
  mode: string;
  referenceId: string;
  amount: number;
  currency: string;
  /** Continue as new past this many events (tests use a small bound). */
  historyBound?: number;
}

/** The static summary an operator reads at a glance in the Temporal UI's list and header. */
export function sessionSummary(s: SessionStart): string {
  const merchant = s.merchantName ? `${s.merchantName} (${s.merchantId})` : s.merchantId;
  return `checkout ${s.referenceId}: ${s.amount} ${s.currency}, ${merchant}, ${s.mode}`;
}

function startOptions(taskQueue: string, s: SessionStart, now: number) {
  const input: SessionWorkflowInput = {
    sessionId: s.sessionId,
    expiresInMs: s.expiresAtMs - now,
    expiresAtMs: s.expiresAtMs,
    ...(s.historyBound === undefined ? {} : { historyBound: s.historyBound }),
  };
  return {
    workflowId: sessionWorkflowId(s.sessionId),
    taskQueue,
    args: [input] as [SessionWorkflowInput],
    typedSearchAttributes: [
      { key: merchantIdKey, value: s.merchantId },
      { key: modeKey, value: s.mode },
      { key: referenceIdKey, value: s.referenceId },
      { key: sessionStatusKey, value: 'open' },
    ],
    staticSummary: sessionSummary(s),
    staticDetails: [
      `session ${s.sessionId}`,
      `reference_id ${s.referenceId}`,
      `amount ${s.amount} ${s.currency}`,
      `merchant ${s.merchantName ? `${s.merchantName} ` : ''}${s.merchantId}`,
      `mode ${s.mode}`,
      `expires_at ${new Date(s.expiresAtMs).toISOString()}`,
    ].join('\n'),
  };
}

/** Starts the session's workflow unless it already runs (the id is the session id, so this is idempotent). */
export async function startSessionWorkflow(client: Client, taskQueue: string, session: SessionStart): Promise<void> {
  await client.workflow.start<typeof sessionWorkflow>(workflowType, {
    ...startOptions(taskQueue, session, Date.now()),
    workflowIdConflictPolicy: WorkflowIdConflictPolicy.USE_EXISTING,
  });
}

/**
 * Hands a new attempt to the session's workflow, starting the workflow if it is somehow gone (with
 * the session's `expires_at`), so no attempt is ever without the process that settles it.
 */
export async function signalAttemptStarted(
  client: Client,
  taskQueue: string,
  { session, attempt }: { session: SessionStart; attempt: AttemptStart },
): Promise<void> {
  await client.workflow.signalWithStart<typeof sessionWorkflow, [AttemptStart]>(workflowType, {
    ...startOptions(taskQueue, session, Date.now()),
    signal: attemptStartedSignal,
    signalArgs: [attempt],
  });
}

/**
 * Tells the session's workflow it is settled so its timer stops early. A workflow that has ended
 * (or never started) has no timer left: that is not an error. Anything else throws, for the
 * handoff relay to retry (src/temporal/handoffs.ts); the workflow ignores a repeat.
 */
export async function signalSessionSettled(
  client: Client,
  sessionId: string,
  status: string,
  by: string,
): Promise<void> {
  await unlessEnded(
    client.workflow.getHandle(sessionWorkflowId(sessionId)).signal(sessionSettledSignal, { status, by }),
  );
}

/** Passes a test-gateway button to the session workflow running the attempt (throws WorkflowNotFoundError when none runs). */
export async function signalDecision(
  client: Client,
  sessionId: string,
  attemptId: string,
  decision: TestGatewayDecision,
): Promise<void> {
  await client.workflow.getHandle(sessionWorkflowId(sessionId)).signal(attemptDecisionSignal, { attemptId, decision });
}

/**
 * Passes a test-gateway button to the session workflow as an Update and returns the attempt's
 * status as the workflow settled it (throws when the workflow did not take it: a run of a release
 * without the handler, a deadline, Temporal down; the caller then delivers the signal).
 */
export async function decideByUpdate(
  client: Client,
  sessionId: string,
  attemptId: string,
  decision: TestGatewayDecision,
  deadline = Date.now() + DECISION_UPDATE_TIMEOUT_MS,
): Promise<DecisionAnswer> {
  return client.connection.withDeadline(Math.min(deadline, Date.now() + DECISION_UPDATE_TIMEOUT_MS), () =>
    client.workflow
      .getHandle(sessionWorkflowId(sessionId))
      .executeUpdate(attemptDecisionUpdate, { args: [{ attemptId, decision }] }),
  );
}

/**
 * How long a button waits for the workflow's answer (its Update) before the decision goes by its
 * handoff: a workflow task and the settling transaction take milliseconds; a worker down or a
 * saturated server must not hold the shopper's press.
 */
export const DECISION_UPDATE_TIMEOUT_MS = 2000;

/** Asks the session workflow to let the amount rule decide (the shopper came back without a button). */
export async function signalVerify(client: Client, sessionId: string, attemptId: string): Promise<void> {
  await client.workflow.getHandle(sessionWorkflowId(sessionId)).signal(attemptVerifySignal, { attemptId });
}

/**
 * Tells the session workflow an attempt was settled outside it. A workflow that has ended is not
 * an error; anything else throws, for the handoff relay to retry (the workflow ignores a repeat).
 */
export async function signalAttemptResolved(
  client: Client,
  sessionId: string,
  attemptId: string,
  status: string,
): Promise<void> {
  await unlessEnded(
    client.workflow.getHandle(sessionWorkflowId(sessionId)).signal(attemptResolvedSignal, { attemptId, status }),
  );
}

/**
 * Tells the session workflow its deadlines moved (test mode's fast-forward). A workflow that has
 * ended is not an error; anything else throws, for the handoff relay to retry.
 */
export async function signalFastForwarded(client: Client, sessionId: string, moved: FastForward): Promise<void> {
  await unlessEnded(client.workflow.getHandle(sessionWorkflowId(sessionId)).signal(sessionFastForwardedSignal, moved));
}

/** Delivers an `attempt_decided` handoff: the button as a signal; a workflow that has ended has nothing to decide. */
export async function deliverDecision(
  client: Client,
  sessionId: string,
  attemptId: string,
  decision: TestGatewayDecision,
): Promise<void> {
  await unlessEnded(signalDecision(client, sessionId, attemptId, decision));
}

/** Waits for a signal; a workflow that has ended (nothing left to tell) is not an error. */
async function unlessEnded(signal: Promise<void>): Promise<void> {
  try {
    await signal;
  } catch (err) {
    if (!(err instanceof WorkflowNotFoundError)) throw err;
  }
}

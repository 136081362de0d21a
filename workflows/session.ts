import { condition, proxyActivities, setHandler, sleep } from '@temporalio/workflow';
import type { AttemptActivities } from '../activities/attempts';
import type { SessionActivities } from '../activities/session';
import { amountRuleOutcome } from '../src/checkout/amount-rule';
import {
  AttemptStart,
  attemptDecisionSignal,
  attemptResolvedSignal,
  attemptStartedSignal,
  attemptVerifySignal,
  sessionSettledSignal,
  SessionWorkflowInput,
  TestGatewayDecision,
} from '../src/temporal/session-messages';
import { attemptSchedule } from '../src/temporal/session-schedule';

const activityOptions = { startToCloseTimeout: '30 seconds', retry: { maximumInterval: '1 minute' } } as const;
const { expireSession } = proxyActivities<SessionActivities>({
  ...activityOptions,
  summary: 'expire the session if it is still open',
});
const { settleAttempt } = proxyActivities<AttemptActivities>({
  ...activityOptions,
  summary: 'settle the attempt and move its session',
});
const { recheckAttempt } = proxyActivities<AttemptActivities>({
  ...activityOptions,
  summary: 'ask the vendor about the pending attempt',
});

/** Session statuses after which nothing more can happen to the session. */
const FINAL = ['completed', 'expired', 'canceled', 'missing', 'discarded'];

/**
 * One per checkout session (workflow id = session id): holds the timer for `expires_at` and runs
 * each payment attempt to its outcome. While an attempt is pending the session reads `processing`
 * and does not expire; if `expires_at` passed meanwhile, a failed attempt expires it at once.
 */
export async function sessionWorkflow({ expiresInMs, sessionId }: SessionWorkflowInput): Promise<string> {
  const expiresAtMs = Date.now() + Math.max(expiresInMs, 1);
  let settled: string | null = null;
  const queue: Array<AttemptStart & { startedAtMs: number }> = [];
  const known = new Set<string>();
  const decisions = new Map<string, TestGatewayDecision>();
  const verified = new Set<string>();
  const resolved = new Set<string>();
  const adopt = (attempt: AttemptStart) => {
    if (known.has(attempt.attemptId)) return;
    known.add(attempt.attemptId);
    queue.push({ ...attempt, startedAtMs: Date.now() });
  };
  setHandler(sessionSettledSignal, ({ status }) => {
    settled = status;
  });
  setHandler(attemptStartedSignal, adopt);
  setHandler(attemptDecisionSignal, ({ attemptId, decision }) => {
    if (!decisions.has(attemptId)) decisions.set(attemptId, decision);
  });
  setHandler(attemptVerifySignal, ({ attemptId }) => void verified.add(attemptId));
  setHandler(attemptResolvedSignal, ({ attemptId }) => void resolved.add(attemptId));

  /** Runs one attempt to its outcome; returns the session's status afterwards. */
  async function runAttempt(attempt: AttemptStart & { startedAtMs: number }): Promise<string> {
    const id = attempt.attemptId;
    const timesOutAtMs = attempt.startedAtMs + attemptSchedule.timeoutMs;
    const settle = async (outcome: 'succeeded' | 'failed' | 'canceled', reason?: string) =>
      (await settleAttempt({ attemptId: id, outcome, reason, expireIfDue: Date.now() >= expiresAtMs })).sessionStatus;
    // A newer attempt can only exist once this one was settled elsewhere (one pending per session).
    const settledElsewhere = () => resolved.has(id) || queue.length > 0;

    const heard = await condition(
      () => decisions.has(id) || verified.has(id) || settledElsewhere(),
      Math.max(timesOutAtMs - Date.now(), 1),
      { summary: 'until the shopper decides or returns (24 h at most)' },
    );
    if (settledElsewhere()) return 'open';
    if (!heard) return settle('failed', 'timeout');
    const decision = decisions.get(id);
    if (decision === 'succeeded') return settle('succeeded');
    if (decision === 'failed') return settle('failed', 'simulated_decline');
    if (decision === 'canceled') return settle('canceled', 'canceled_by_shopper');
    if (decision === 'slow') await sleep(attemptSchedule.slowAnswerMs, { summary: 'slow button: no answer for 90 s' });

    // The amount rule: the simulated vendor's own answer.
    switch (amountRuleOutcome(attempt.presentedAmount)) {
      case 'declined':
        return settle('failed', 'simulated_decline');
      case 'delayed_success':
        await sleep(attemptSchedule.delayedSuccessMs, { summary: 'amount rule 003: pending for 30 s' });
        return settle('succeeded');
      case 'succeeded':
        return settle('succeeded');
      case 'pending':
        break;
    }
    const backoff = attemptSchedule.recheckBackoffMs;
    for (let check = 0; ; check++) {
      const left = timesOutAtMs - Date.now();
      if (left <= 0) return settle('failed', 'timeout');
      await sleep(Math.min(backoff[Math.min(check, backoff.length - 1)], left), {
        summary: 're-check backoff (fails with timeout 24 h after the attempt began)',
      });
      if (Date.now() >= timesOutAtMs) return settle('failed', 'timeout');
      const answer = await recheckAttempt({ attemptId: id });
      if (answer === 'succeeded') return settle('succeeded');
      if (answer === 'failed') return settle('failed', 'declined');
      if (answer === 'settled') return 'open';
    }
  }

  for (;;) {
    if (settled !== null) return settled;
    const next = queue.shift();
    if (next) {
      const status = await runAttempt(next);
      if (FINAL.includes(status)) return status;
      continue;
    }
    const remaining = expiresAtMs - Date.now();
    if (remaining > 0) {
      await condition(() => settled !== null || queue.length > 0, remaining, {
        summary: 'until expires_at, unless settled first',
      });
      continue;
    }
    const { status, pendingAttempt } = await expireSession({ sessionId });
    if (status !== 'processing') return status;
    // An attempt is with the vendor: see it through first (its own signal may still be on its way).
    if (pendingAttempt && !known.has(pendingAttempt.attemptId)) adopt(pendingAttempt);
    else await condition(() => queue.length > 0, '1 minute', { summary: 'until the pending attempt is handed over' });
  }
}

import {
  ActivityFailure,
  allHandlersFinished,
  condition,
  makeContinueAsNewFunc,
  patched,
  proxyActivities,
  proxyLocalActivities,
  setCurrentDetails,
  setHandler,
  setWorkflowOptions,
  upsertSearchAttributes,
  workflowInfo,
} from '@temporalio/workflow';
import type { AttemptActivities } from '../activities/attempts';
import type { SessionActivities } from '../activities/session';
import { amountRuleOutcome } from '../src/checkout/amount-rule';
import { sessionStatusKey } from '../src/temporal/search-attributes';
import {
  AttemptStart,
  attemptDecisionSignal,
  attemptDecisionUpdate,
  attemptResolvedSignal,
  attemptSchedule,
  attemptStartedSignal,
  attemptVerifySignal,
  sessionFastForwardedSignal,
  sessionSchedule,
  sessionSettledSignal,
  SessionWorkflowInput,
  TestGatewayDecision,
} from '../src/temporal/session';
import { patches } from './patches';
import { versioningBehaviors } from '../src/temporal/versioning';

const activityOptions = { startToCloseTimeout: '30 seconds', retry: { maximumInterval: '1 minute' } } as const;
const { expireSession } = proxyActivities<SessionActivities>({
  ...activityOptions,
  summary: 'expire the session if it is still open',
});
const { settleAttempt } = proxyActivities<AttemptActivities>({
  ...activityOptions,
  summary: 'settle the attempt and move its session',
});
/**
 * The same transaction as a local activity (patch session-local-settle): run by the worker inside
 * the workflow task that decided it, so no activity task goes through the server and back (the
 * outcome commits one server round trip sooner, and the server records a marker, not three
 * events). Past 10 s of local retries it is scheduled again as a timer-backed local attempt.
 */
const { settleAttempt: settleAttemptLocally } = proxyLocalActivities<AttemptActivities>({
  startToCloseTimeout: '10 seconds',
  localRetryThreshold: '10 seconds',
  retry: { maximumInterval: '1 minute' },
  summary: 'settle the attempt and move its session (local)',
});
type RecheckAnswer = Awaited<ReturnType<AttemptActivities['recheckAttempt']>>;

/** Session statuses after which nothing more can happen to the session. */
const FINAL = ['completed', 'expired', 'canceled', 'missing', 'discarded'];

type Adopted = AttemptStart & { startedAtMs: number };

/** `2026-11-24 09:32:56 UTC`: how current details name a moment. */
const at = (ms: number) => `${new Date(ms).toISOString().slice(0, 19).replace('T', ' ')} UTC`;

setWorkflowOptions({ versioningBehavior: versioningBehaviors.sessionWorkflow }, sessionWorkflow);

/**
 * One per checkout session (workflow id = session id): holds the timer for `expires_at` and runs
 * each payment attempt to its outcome. While an attempt is pending the session reads `processing`
 * and does not expire; if `expires_at` passed meanwhile, a failed attempt expires it at once.
 *
 * Every deadline derives from recorded times, not from when a worker first ran the workflow: the
 * session's `expires_at` and each attempt's recorded start (runs started before those were passed
 * fall back to the time left at start and the time of hand-over). Past `historyBound` events it
 * continues as new, carrying its state. Test mode's fast-forward moves those recorded times
 * earlier (`sessionFastForwarded`) and every wait re-arms from them.
 */
export async function sessionWorkflow(input: SessionWorkflowInput): Promise<string> {
  const { sessionId, carried } = input;
  let expiresAtMs = input.expiresAtMs ?? Date.now() + Math.max(input.expiresInMs, 1);
  const historyBound = input.historyBound ?? sessionSchedule.historyBound;
  let settled: string | null = carried?.settled ?? null;
  const queue: Adopted[] = [...(carried?.queue ?? [])];
  const known = new Set<string>(carried?.known ?? []);
  const decisions = new Map<string, TestGatewayDecision>(carried?.decisions ?? []);
  const verified = new Set<string>(carried?.verified ?? []);
  const resolved = new Set<string>(carried?.resolved ?? []);
  /** Fast-forwarded starts of attempts whose hand-over has not arrived yet (at most the one pending). */
  const movedStarts = new Map<string, number>(carried?.movedStarts ?? []);
  /** The attempt `runAttempt` is running. */
  let running: Adopted | undefined;
  /** Bumped by each fast-forward: a wait in progress re-arms its timer from the moved times. */
  let moves = 0;
  const adopt = (attempt: AttemptStart) => {
    if (known.has(attempt.attemptId)) return;
    known.add(attempt.attemptId);
    const startedAtMs = attempt.startedAtMs ?? Date.now();
    const moved = movedStarts.get(attempt.attemptId) ?? startedAtMs;
    movedStarts.delete(attempt.attemptId);
    queue.push({ ...attempt, startedAtMs: Math.min(startedAtMs, moved) });
  };
  setHandler(sessionSettledSignal, ({ status }) => {
    settled = status;
  });
  setHandler(attemptStartedSignal, adopt);
  setHandler(attemptDecisionSignal, ({ attemptId, decision }) => {
    if (!decisions.has(attemptId)) decisions.set(attemptId, decision);
  });
  /**
   * Each attempt's status as its decision's Update answers it: set when `runAttempt` settled it, or
   * `pending` once it waits for a later outcome (or ends without one). Not carried: an Update
   * waiting when the run ends answers `pending`.
   */
  const answers = new Map<string, string>();
  /** The run is ending: Updates still waiting answer `pending`. */
  let ending = false;
  setHandler(attemptDecisionUpdate, async ({ attemptId, decision }) => {
    if (!decisions.has(attemptId)) decisions.set(attemptId, decision);
    await condition(() => answers.has(attemptId) || ending);
    return { attemptStatus: answers.get(attemptId) ?? 'pending' };
  });
  setHandler(attemptVerifySignal, ({ attemptId }) => void verified.add(attemptId));
  setHandler(attemptResolvedSignal, ({ attemptId }) => void resolved.add(attemptId));
  setHandler(sessionFastForwardedSignal, ({ expiresAtMs: movedExpiry, attempt }) => {
    if (!patched(patches.sessionFastForward)) return;
    expiresAtMs = Math.min(expiresAtMs, movedExpiry);
    if (attempt) {
      const adopted = [running, ...queue].find((a) => a?.attemptId === attempt.attemptId);
      if (adopted) adopted.startedAtMs = Math.min(adopted.startedAtMs, attempt.startedAtMs);
      else if (!known.has(attempt.attemptId)) {
        movedStarts.set(
          attempt.attemptId,
          Math.min(attempt.startedAtMs, movedStarts.get(attempt.attemptId) ?? Infinity),
        );
      }
    }
    moves++;
  });

  /**
   * Waits until `done()` holds (true) or `deadline()` passes (false). A fast-forward re-arms the
   * timer from the moved deadline; without one this is a single `condition` with one timer.
   */
  async function waitUntil(deadline: () => number, done: () => boolean, summary: string): Promise<boolean> {
    for (;;) {
      const seen = moves;
      const woke = await condition(() => done() || moves !== seen, Math.max(deadline() - Date.now(), 1), { summary });
      if (moves === seen) return woke; // not moved: exactly the condition's answer
      if (done()) return true;
      if (deadline() <= Date.now()) return false;
    }
  }
  /** Waits `ms` on the attempt's clock: a fast-forward of the attempt during the wait shortens it as much. */
  const attemptWait = async (attempt: Adopted, ms: number, summary: string) => {
    const endsAtMs = Date.now() + ms;
    const startedAtMs = attempt.startedAtMs;
    await waitUntil(
      () => endsAtMs - (startedAtMs - attempt.startedAtMs),
      () => false,
      summary,
    );
  };

  /** The `SessionStatus` search attribute, kept current (runs from before the patch leave it alone). */
  let shownStatus = carried?.shownStatus ?? 'open';
  const show = (status: string): string => {
    if (status !== shownStatus && patched(patches.sessionSearchAttributes)) {
      shownStatus = status;
      upsertSearchAttributes([{ key: sessionStatusKey, value: status }]);
    }
    return status;
  };
  const waiting = (what: string) => setCurrentDetails(`${what}; session expires_at ${at(expiresAtMs)}`);

  /** Runs one attempt to its outcome; returns the session's status afterwards. */
  async function runAttempt(attempt: Adopted): Promise<string> {
    const id = attempt.attemptId;
    const timesOutAtMs = () => attempt.startedAtMs + attemptSchedule.timeoutMs;
    const dueAt = () => `times out at ${at(timesOutAtMs())}`;
    const settle = async (outcome: 'succeeded' | 'failed' | 'canceled', reason?: string) => {
      const run = patched(patches.sessionLocalSettle) ? settleAttemptLocally : settleAttempt;
      const result = await run({ attemptId: id, outcome, reason, expireIfDue: Date.now() >= expiresAtMs });
      answers.set(id, result.attemptStatus);
      return show(result.sessionStatus);
    };
    /** The outcome will come later: a decision's Update answers `pending` now. */
    const later = () => void (answers.has(id) || answers.set(id, 'pending'));
    // A newer attempt can only exist once this one was settled elsewhere (one pending per session).
    const settledElsewhere = () => resolved.has(id) || queue.length > 0;
    // Only the simulated vendor answers by button or amount rule; any other is asked at the vendor.
    const simulated = attempt.testGateway || !patched(patches.sessionTestGatewayOnly);
    show('processing');

    const heardFrom = () => (simulated && decisions.has(id)) || verified.has(id) || settledElsewhere();
    const kind = attempt.testGateway ? 'test gateway' : 'vendor';
    waiting(`attempt ${id} pending (${kind}), waiting for the shopper to decide or return; ${dueAt()}`);
    let heard: boolean;
    // Look at the session at expires_at: an "attempt resolved" signal that was lost must not keep it open.
    if (Date.now() < expiresAtMs && expiresAtMs < timesOutAtMs() && patched(patches.sessionExpiryCheckDuringAttempt)) {
      heard = await waitUntil(
        () => Math.min(expiresAtMs, timesOutAtMs()),
        heardFrom,
        'until the shopper decides or returns, or expires_at',
      );
      // (Only a fast-forward of the attempt can bring its timeout before expires_at.)
      if (!heard && Date.now() >= expiresAtMs) {
        const { status, pendingAttempt } = await expireSession({ sessionId });
        if (status !== 'processing') return show(status);
        if (pendingAttempt && pendingAttempt.attemptId !== id) {
          adopt(pendingAttempt);
          return 'processing';
        }
        heard = await waitUntil(
          timesOutAtMs,
          heardFrom,
          'until the shopper decides or returns (24 h after the attempt began at most)',
        );
      }
    } else {
      heard = await waitUntil(timesOutAtMs, heardFrom, 'until the shopper decides or returns (24 h at most)');
    }
    if (settledElsewhere()) return show('open');
    if (!heard) return settle('failed', 'timeout');
    if (simulated) {
      const decision = decisions.get(id);
      if (decision === 'succeeded') return settle('succeeded');
      if (decision === 'failed') return settle('failed', 'simulated_decline');
      if (decision === 'canceled') return settle('canceled', 'canceled_by_shopper');
      if (decision === 'slow') {
        later();
        waiting(`attempt ${id} pending, slow button, answer due ${at(Date.now() + attemptSchedule.slowAnswerMs)}`);
        await attemptWait(attempt, attemptSchedule.slowAnswerMs, 'slow button: no answer for 90 s');
      }

      // The amount rule: the simulated vendor's own answer.
      switch (amountRuleOutcome(attempt.presentedAmount)) {
        case 'declined':
          return settle('failed', 'simulated_decline');
        case 'delayed_success':
          later();
          waiting(
            `attempt ${id} pending, amount rule 003, succeeds at ${at(Date.now() + attemptSchedule.delayedSuccessMs)}`,
          );
          await attemptWait(attempt, attemptSchedule.delayedSuccessMs, 'amount rule 003: pending for 30 s');
          return settle('succeeded');
        case 'succeeded':
          return settle('succeeded');
        case 'pending':
          break;
      }
    }
    later();
    const backoff = attemptSchedule.recheckBackoffMs;
    for (let check = 0; ; check++) {
      const left = timesOutAtMs() - Date.now();
      if (left <= 0) return settle('failed', 'timeout');
      const delay = Math.min(backoff[Math.min(check, backoff.length - 1)], left);
      waiting(`attempt ${id} pending at the vendor, re-check ${check + 1} at ${at(Date.now() + delay)}; ${dueAt()}`);
      await attemptWait(attempt, delay, 're-check backoff (fails with timeout 24 h after the attempt began)');
      if (Date.now() >= timesOutAtMs()) return settle('failed', 'timeout');
      // The re-check's retries end when the attempt's 24 hours do: it cannot hold the attempt past them.
      const { recheckAttempt } = proxyActivities<AttemptActivities>({
        ...activityOptions,
        scheduleToCloseTimeout: Math.max(timesOutAtMs() - Date.now(), 1),
        summary: 'ask the vendor about the pending attempt',
      });
      let answer: RecheckAnswer;
      try {
        answer = await recheckAttempt({ attemptId: id });
      } catch (err) {
        if (err instanceof ActivityFailure) continue; // the loop fails it with timeout once the time is up
        throw err;
      }
      if (answer === 'succeeded') return settle('succeeded');
      if (answer === 'failed') return settle('failed', 'declined');
      if (answer === 'settled') return show('open');
    }
  }

  const continueAsNew = () =>
    makeContinueAsNewFunc<typeof sessionWorkflow>({ typedSearchAttributes: workflowInfo().typedSearchAttributes })({
      sessionId,
      expiresInMs: input.expiresInMs,
      expiresAtMs,
      historyBound,
      carried: {
        settled,
        shownStatus,
        queue,
        known: [...known],
        decisions: [...decisions],
        verified: [...verified],
        resolved: [...resolved],
        ...(movedStarts.size > 0 ? { movedStarts: [...movedStarts] } : {}),
      },
    });
  const pastBound = () =>
    (workflowInfo().historyLength >= historyBound || workflowInfo().continueAsNewSuggested) &&
    patched(patches.sessionContinueAsNew);

  try {
    for (;;) {
      if (settled !== null) return show(settled);
      if (pastBound()) return continueAsNew();
      const next = queue.shift();
      if (next) {
        running = next;
        const status = await runAttempt(next).finally(() => {
          running = undefined;
          if (!answers.has(next.attemptId)) answers.set(next.attemptId, 'pending');
        });
        if (FINAL.includes(status)) return status;
        continue;
      }
      const remaining = expiresAtMs - Date.now();
      if (remaining > 0) {
        waiting('open, no attempt pending');
        await waitUntil(
          () => expiresAtMs,
          () => settled !== null || queue.length > 0,
          'until expires_at, unless settled first',
        );
        continue;
      }
      const { status, pendingAttempt } = await expireSession({ sessionId });
      if (status !== 'processing') return show(status);
      // An attempt is with the vendor: see it through first (its own signal may still be on its way).
      if (pendingAttempt && !known.has(pendingAttempt.attemptId)) adopt(pendingAttempt);
      else {
        waiting('expires_at passed with an attempt at the vendor; waiting for its hand-over');
        await condition(() => queue.length > 0, sessionSchedule.handoverWaitMs, {
          summary: 'until the pending attempt is handed over',
        });
      }
    }
  } finally {
    // An Update still waiting answers before the run ends (returns, or continues as new).
    ending = true;
    await condition(allHandlersFinished);
  }
}

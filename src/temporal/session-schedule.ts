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
  /** An attempt with no outcome this long after it began fails with `timeout`. */
  timeoutMs: 24 * 60 * 60 * 1000,
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

/** Webhook delivery constants from the Checkout spec, imported by the workflow, the activities and the tests. */
const MINUTE = 60_000;
const HOUR = 60 * MINUTE;
const DAY = 24 * HOUR;

/** Delay before attempt n + 1 after attempt n failed (index n - 1): 8 attempts in all, about 2.5 days. */
export const retryDelaysMs: readonly number[] = [MINUTE, 5 * MINUTE, 30 * MINUTE, 2 * HOUR, 6 * HOUR, DAY, DAY];

/** Attempts per delivery, the first included. */
export const MAX_ATTEMPTS = retryDelaysMs.length + 1;

/** An attempt that has no response status within this long fails with `timeout`. */
export const DELIVERY_TIMEOUT_MS = 10_000;

/** An endpoint failing continuously (no success) for this long gets one e-mail to the merchant's contact. */
export const NOTIFY_AFTER_FAILING_MS = DAY;

/** An endpoint failing continuously (no success) for this long is disabled. */
export const DISABLE_AFTER_FAILING_MS = 3 * DAY;

/** After a rotation the previous secret keeps signing (a second `v1`) for this long. */
export const ROTATION_OVERLAP_MS = DAY;

/** When attempt `attemptNo` (1-based) made at `attemptAtMs` failed, the time the next one is due; null after the last. */
export function nextRetryAtMs(attemptNo: number, attemptAtMs: number): number | null {
  return attemptNo < MAX_ATTEMPTS ? attemptAtMs + retryDelaysMs[attemptNo - 1] : null;
}

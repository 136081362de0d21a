import { performance } from 'node:perf_hooks';
import { Context } from '@temporalio/activity';

/**
 * How much earlier than its start-to-close timeout an activity attempt counts as past it here:
 * the server's timer started when the task was handed out, a little before this process began it.
 */
export const ACTIVITY_DEADLINE_MARGIN_MS = 1000;

/** The running activity attempt's own deadline, on this process's monotonic clock (a pause counts, a skewed wall clock does not). */
export interface ActivityDeadline {
  activityType: string;
  activityId: string;
  attempt: number;
  /** True once the server has (or is about to have) timed the attempt out and may have retried it elsewhere. */
  passed(): boolean;
}

/**
 * The deadline of the activity attempt this is called in, taken at its start: its start-to-close
 * timeout from now, less ACTIVITY_DEADLINE_MARGIN_MS. Undefined outside an activity (a direct call
 * from a script or a test) and for an activity without a start-to-close timeout.
 */
export function activityDeadline(): ActivityDeadline | undefined {
  let info: Context['info'];
  try {
    info = Context.current().info;
  } catch {
    return undefined;
  }
  const timeoutMs = info.startToCloseTimeoutMs;
  if (!timeoutMs) return undefined;
  const startedAt = performance.now();
  return {
    activityType: info.activityType,
    activityId: info.activityId,
    attempt: info.attempt,
    passed: () => performance.now() - startedAt >= timeoutMs - ACTIVITY_DEADLINE_MARGIN_MS,
  };
}

/** A write refused because the claim, lease or activity deadline it was made under is no longer the writer's. */
export class StaleClaimError extends Error {
  constructor(what: string) {
    super(`stale claim: ${what}`);
    this.name = 'StaleClaimError';
  }
}

/**
 * Throws StaleClaimError when `deadline` has passed: called last in a transaction (just before its
 * commit), so the writes of an attempt that outlived its timeout roll back.
 */
export function assertBeforeDeadline(deadline: ActivityDeadline | undefined): void {
  if (deadline?.passed())
    throw new StaleClaimError(
      `activity ${deadline.activityType} (${deadline.activityId}, attempt ${deadline.attempt}) is past its start-to-close timeout`,
    );
}

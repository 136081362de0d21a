/**
 * One attempt of a delivery and what became of it: the words the queue (which hands attempts out)
 * and the record (which writes their rows) share, in a module of their own so neither imports the other.
 */

/** One attempt of one delivery to the endpoint at hand: the rest of its delivery row's unique key. */
export interface AttemptKey {
  eventId: string;
  generation: number;
  attemptNo: number;
}

/**
 * What became of an attempt: `delivered`; `failed` (retry at nextRetryAtMs unless null); `disabled`
 * or `deleted` (the endpoint; nothing was sent); `dropped` (the event itself is gone).
 */
export type AttemptOutcome = 'delivered' | 'failed' | 'disabled' | 'deleted' | 'dropped';

export interface AttemptResult {
  outcome: AttemptOutcome;
  statusCode: number | null;
  error: string | null;
  nextRetryAtMs: number | null;
  /** The endpoint's failure clock after this attempt (null while healthy, disabled or gone). */
  failingSinceMs: number | null;
}

export const attemptKey = (k: AttemptKey) => `${k.eventId}#${k.generation}#${k.attemptNo}`;
export const droppedResult: AttemptResult = {
  outcome: 'dropped',
  statusCode: null,
  error: null,
  nextRetryAtMs: null,
  failingSinceMs: null,
};

/**
 * Every patch id the workflows use with `patched()` / `deprecatePatch()`, in one place (see
 * docs/workflows.md for how to add one and when to retire it). Each names the change it guards.
 */
export const patches = {
  /** Session: `SessionStatus` kept current with `upsertSearchAttributes` as the session moves. */
  sessionSearchAttributes: 'session-search-attributes',
  /** Session: buttons and the amount rule decide only test-gateway attempts; others are asked at the vendor. */
  sessionTestGatewayOnly: 'session-test-gateway-only',
  /** Session: while an attempt runs, look at the session at `expires_at` (a lost "attempt resolved" signal). */
  sessionExpiryCheckDuringAttempt: 'session-expiry-check-during-attempt',
  /** Session: continue as new past the history bound, carrying its state. */
  sessionContinueAsNew: 'session-continue-as-new',
  /**
   * Session: test mode's fast-forward signal moves `expires_at` and the pending attempt's start, and
   * every wait re-arms from them (marked when a run first hears the signal; runs that never hear it
   * make the same commands as before).
   */
  sessionFastForward: 'session-fast-forward',
  /** Session: an attempt's outcome is settled by a local activity (no activity task through the server). */
  sessionLocalSettle: 'session-local-settle',
  /** Refund: the vendor call and the settling write are separate activities. */
  refundVendorCallApart: 'refund-vendor-call-apart',
  /**
   * Delivery (the old `deliveryWorkflow` type): at its next workflow task a run moves its in-memory
   * queue into Postgres (`webhook_queue`) and continues as an `endpointDeliveryWorkflow`.
   */
  deliveryQueueToPostgres: 'delivery-queue-to-postgres',
  /** Delivery: a `deliverDue` that attempted 5 or more is followed at once by another (no wake needed). */
  deliveryKeepWatchingBusyEndpoint: 'delivery-keep-watching-busy-endpoint',
  /** Delivery: 24 hours into a failure streak, a timer and one activity that e-mails the merchant's contact. */
  deliveryFailingNotice: 'delivery-failing-notice',
  /** Delivery: a new run continues as new past 1,000 history events (5,000 before), so a restarted worker replays it well within the task timeout. */
  deliveryShorterRuns: 'delivery-shorter-runs',
  /**
   * Delivery: a `deliverDue` takes every free slot (`max_in_flight`), not 10 of them: one activity
   * per endpoint, whose claims and recording transactions are twice as wide (half the statements).
   */
  deliveryOneBatch: 'delivery-one-batch',
} as const;

/** The attempt event streams' channel and timings, named once for the code, the document and the tests. */
/** The channel a settled attempt is announced on (payload: the attempt id), in the transaction that settles it. */
export const ATTEMPT_SETTLED_CHANNEL = 'attempt_settled';

/** The timings of the attempt streams, named once for the code and the tests. */
export const attemptStreamRules = {
  /** A comment line this often keeps proxies from closing an idle stream. */
  heartbeatMs: 15_000,
  /** A stream ends (with a `reconnect` event) after this long; the page opens a new one. */
  maxLifeMs: 5 * 60_000,
  /** Every watched attempt is re-read this often: the previous release's workers never notify, and a notification can be lost. */
  backstopMs: 2000,
  /** A stream's reads that fail in a row (each retried by the backstop) before it ends and the page polls. */
  readFailuresToEnd: 3,
  /** The backstop read's deadline. */
  backstopTimeoutMs: 1000,
  /** The `retry:` an EventSource waits before it reconnects. */
  clientRetryMs: 1000,
  /** The LISTEN connection stays this long after the last stream closed, so a burst of pages does not churn it. */
  lingerMs: 30_000,
  /** Delays before each reconnect of a lost LISTEN connection in a row, the last one repeating. */
  reconnectDelaysMs: [250, 500, 1000, 2000, 5000],
} as const;

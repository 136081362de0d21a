/** Task queue and workflow ids shared by the API, the worker and the tests. */
export const defaultTaskQueue = 'svc-main';

/** The single long-lived janitor workflow. */
export const janitorWorkflowId = 'janitor';

/** How often the janitor sweeps, and how long purged records are kept. */
export const janitorSchedule = {
  every: '1 hour',
  idempotencyRetentionMs: 24 * 60 * 60 * 1000,
  rateLimitRetentionMs: 24 * 60 * 60 * 1000,
  /** Continue-as-new after this many sweeps, as the test server never suggests it. */
  sweepsPerRun: 200,
} as const;

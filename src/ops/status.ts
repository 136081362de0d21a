import type { Client } from '@temporalio/client';
import type { Db } from '../db/knex';
import { readBacklogs, type Backlogs } from '../telemetry/backlogs';
import { withDeadline } from '../telemetry/metrics';
import { missingSearchAttributes } from '../temporal/search-attribute-setup';

/** What `ops status` prints: the figures an on-call looks at first. */
export interface Status {
  /** The durable queues, read by the same statement as the scrape-time gauges. */
  backlogs: Backlogs;
  webhook_endpoints: { failing: number; disabled: number };
  sessions_processing: number;
  temporal: { reachable: boolean; namespace: string; missing_search_attributes: string[] | null; error?: string };
}

/** Webhook endpoints failing (enabled, the 3-day clock running) and disabled; sessions with a payment in progress. */
async function endpointsAndSessions(db: Db) {
  const { rows } = await db.raw(
    `SELECT (SELECT count(*) FROM webhook_endpoints WHERE status = 'enabled' AND failing_since IS NOT NULL) AS failing,
            (SELECT count(*) FROM webhook_endpoints WHERE status = 'disabled') AS disabled,
            (SELECT count(*) FROM checkout_sessions WHERE status = 'processing') AS processing`,
  );
  const [row] = rows as Array<Record<'failing' | 'disabled' | 'processing', string>>;
  return {
    webhook_endpoints: { failing: Number(row.failing), disabled: Number(row.disabled) },
    sessions_processing: Number(row.processing),
  };
}

/** Whether Temporal answers and the namespace has our search attributes (null when that could not be read). */
async function temporalStatus(connect: (() => Promise<Client>) | undefined, namespace: string) {
  if (!connect)
    return { reachable: false, namespace, missing_search_attributes: null, error: 'no Temporal connection' };
  try {
    const client = await withDeadline('temporal', 5000, connect);
    const missing = await withDeadline('search attributes', 5000, () =>
      missingSearchAttributes(client.connection, namespace),
    );
    return { reachable: true, namespace, missing_search_attributes: missing };
  } catch (err) {
    const error = err instanceof Error ? err.message : String(err);
    return { reachable: false, namespace, missing_search_attributes: null, error };
  }
}

/** `ops status`: backlogs, failing endpoints, sessions in payment and Temporal's state, read in parallel. */
export async function readStatus(
  db: Db,
  temporal: (() => Promise<Client>) | undefined,
  namespace: string,
): Promise<Status> {
  const [backlogs, counts, temporalState] = await Promise.all([
    readBacklogs(db),
    endpointsAndSessions(db),
    temporalStatus(temporal, namespace),
  ]);
  return { backlogs, ...counts, temporal: temporalState };
}

import type { Db } from '../db/knex';
import { backfillUndelivered } from '../../migrations/20261126050000_undelivered_backfill';
import { OpsError } from './errors';

/** The range `max_in_flight` takes (the column's check). */
export const MAX_IN_FLIGHT_RANGE = { min: 1, max: 200 } as const;

/**
 * `webhook-endpoint set-concurrency`: how many POSTs may be in flight to one endpoint at once (default
 * 20). The endpoint's workflow reads it with each batch, so it applies within seconds.
 */
export async function setEndpointConcurrency(db: Db, endpointId: string, maxInFlight: number) {
  const { min, max } = MAX_IN_FLIGHT_RANGE;
  if (maxInFlight < min || maxInFlight > max) {
    throw new OpsError('invalid_max_in_flight', `max-in-flight must be between ${min} and ${max}`);
  }
  const [row] = await db('webhook_endpoints')
    .where({ id: endpointId })
    .update({ max_in_flight: maxInFlight, updated_at: db.fn.now() })
    .returning(['id', 'merchant_id', 'mode', 'url', 'max_in_flight']);
  if (!row) throw new OpsError('endpoint_not_found', `no webhook endpoint ${endpointId}`);
  return { endpoint: row };
}

/**
 * `webhook-endpoint reconcile-undelivered`: the pass of migration 20261126050000 again, once only a
 * release that keeps `webhook_undelivered` records attempts: lists the failed, never delivered
 * pairs the previous release recorded during the deploy, and unlists those it delivered. Harmless
 * at any time (chunked, one endpoint row at a time, idempotent).
 */
export async function reconcileUndelivered(db: Db) {
  return { listed: await backfillUndelivered(db) };
}

import type { Db } from '../db/knex';
import type { EventRow } from '../checkout/events';
import type { DeliveryRow } from './deliveries';
import { DISABLE_AFTER_FAILING_MS, nextRetryAtMs } from './schedule';

/** One attempt's identity: the unique key of its delivery row. */
export interface AttemptKey {
  eventId: string;
  endpointId: string;
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

const ms = (d: Date | null | undefined) => (d ? new Date(d).getTime() : null);

function outcomeOf(row: Pick<DeliveryRow, 'error'>): AttemptOutcome {
  if (row.error === null) return 'delivered';
  if (row.error === 'endpoint_deleted') return 'deleted';
  if (row.error === 'endpoint_disabled') return 'disabled';
  return 'failed';
}

async function failingSince(db: Db, endpointId: string): Promise<number | null> {
  const row = await db('webhook_endpoints').where({ id: endpointId }).first('status', 'failing_since');
  return row?.status === 'enabled' ? ms(row.failing_since) : null;
}

function resultOf(row: DeliveryRow, failingSinceMs: number | null): AttemptResult {
  return {
    outcome: outcomeOf(row),
    statusCode: row.status_code,
    error: row.error,
    nextRetryAtMs: ms(row.next_retry_at),
    failingSinceMs,
  };
}

/** The attempt's result when its row is already recorded (an activity retry, a repeated signal), else null. */
export async function recordedAttempt(db: Db, key: AttemptKey): Promise<AttemptResult | null> {
  const row: DeliveryRow | undefined = await db('event_deliveries')
    .where({
      event_id: key.eventId,
      endpoint_id: key.endpointId,
      generation: key.generation,
      attempt_no: key.attemptNo,
    })
    .first();
  return row ? resultOf(row, await failingSince(db, key.endpointId)) : null;
}

/**
 * Records an attempt that was made (or refused before sending: `endpoint_deleted`,
 * `endpoint_disabled`, an unsafe target) and moves the endpoint's failure clock in the same
 * transaction: a success stops it, a failure starts it unless a later success was already recorded.
 * A row recorded first by someone else wins, and its result is returned.
 */
export async function recordAttempt(
  db: Db,
  key: AttemptKey,
  event: Pick<EventRow, 'merchant_id' | 'mode'>,
  attempt: { statusCode: number | null; error: string | null; attemptAtMs: number; attempted: boolean },
): Promise<AttemptResult> {
  const failed = attempt.error !== null;
  const nextRetry = failed && attempt.attempted ? nextRetryAtMs(key.attemptNo, attempt.attemptAtMs) : null;
  const attemptAt = new Date(attempt.attemptAtMs);
  return db.transaction(async (trx) => {
    const [row]: DeliveryRow[] = await trx('event_deliveries')
      .insert({
        event_id: key.eventId,
        endpoint_id: key.endpointId,
        generation: key.generation,
        attempt_no: key.attemptNo,
        merchant_id: event.merchant_id,
        mode: event.mode,
        status_code: attempt.statusCode,
        error: attempt.error,
        delivered_at: attempt.attempted ? attemptAt : null,
        next_retry_at: nextRetry === null ? null : new Date(nextRetry),
      })
      .onConflict(['event_id', 'endpoint_id', 'generation', 'attempt_no'])
      .ignore()
      .returning('*');
    if (!row) return (await recordedAttempt(trx, key))!;
    if (attempt.attempted && !failed) {
      await trx.raw(
        `UPDATE webhook_endpoints SET failing_since = NULL, last_success_at = GREATEST(last_success_at, ?) WHERE id = ?`,
        [attemptAt, key.endpointId],
      );
    } else if (attempt.attempted) {
      await trx.raw(
        `UPDATE webhook_endpoints SET failing_since = COALESCE(failing_since, ?)
          WHERE id = ? AND status = 'enabled' AND (last_success_at IS NULL OR last_success_at <= ?)`,
        [attemptAt, key.endpointId, attemptAt],
      );
    }
    return resultOf(row, await failingSince(trx, key.endpointId));
  });
}

/**
 * Records deliveries that will not be attempted (`endpoint_deleted`): one row each, for the attempt
 * that was scheduled, with no delivered_at and no next_retry_at. Idempotent.
 */
export async function recordCancelled(
  db: Db,
  endpointId: string,
  error: string,
  deliveries: ReadonlyArray<{ eventId: string; generation: number; attemptNo: number }>,
): Promise<number> {
  if (deliveries.length === 0) return 0;
  const { rowCount } = await db.raw(
    `INSERT INTO event_deliveries (event_id, endpoint_id, generation, attempt_no, merchant_id, mode, error)
     SELECT e.id, ?, d.generation, d.attempt_no, e.merchant_id, e.mode, ?
       FROM unnest(?::text[], ?::bigint[], ?::int[]) AS d(event_id, generation, attempt_no)
       JOIN events e ON e.id = d.event_id
     ON CONFLICT DO NOTHING`,
    [
      endpointId,
      error,
      deliveries.map((d) => d.eventId),
      deliveries.map((d) => d.generation),
      deliveries.map((d) => d.attemptNo),
    ],
  );
  return rowCount ?? 0;
}

/**
 * Disables the endpoint (`disabled_reason: delivery_failures`) if it is still enabled and has been
 * failing since at least 3 days before `nowMs`, and puts the e-mail to the merchant's contact in
 * the outbox in the same transaction. Returns the failure clock as it stands afterwards.
 */
export async function disableIfStillFailing(
  db: Db,
  endpointId: string,
  nowMs: number,
): Promise<{ disabled: boolean; failingSinceMs: number | null }> {
  return db.transaction(async (trx) => {
    const [endpoint] = await trx('webhook_endpoints')
      .where({ id: endpointId, status: 'enabled' })
      .where('failing_since', '<=', new Date(nowMs - DISABLE_AFTER_FAILING_MS))
      .update({
        status: 'disabled',
        disabled_reason: 'delivery_failures',
        failing_since: null,
        updated_at: new Date(nowMs),
      })
      .returning(['id', 'merchant_id', 'mode', 'url']);
    if (!endpoint) return { disabled: false, failingSinceMs: await failingSince(trx, endpointId) };
    const merchant = await trx('merchants').where({ id: endpoint.merchant_id }).first('contact_email', 'display_name');
    if (merchant?.contact_email) {
      await trx('outbox').insert({
        kind: 'email',
        to: merchant.contact_email,
        subject: `Webhook endpoint disabled: ${endpoint.url}`,
        body: [
          `Hello ${merchant.display_name},`,
          '',
          `Every delivery to your ${endpoint.mode} webhook endpoint ${endpoint.id} (${endpoint.url}) has failed`,
          'for 3 days, so it has been disabled and receives no events.',
          '',
          `Fix the receiver, enable the endpoint again (PATCH /v1/webhook_endpoints/${endpoint.id} with`,
          '{"status": "enabled"}), then redeliver the events you missed (POST /v1/events/{id}/redeliver);',
          'GET /v1/events lists them.',
        ].join('\n'),
      });
    }
    return { disabled: true, failingSinceMs: null };
  });
}

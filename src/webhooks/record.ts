/** Record: each attempt's row, the undelivered list, the endpoint's failure clock, its 24-hour e-mail and 3-day disable. */
import { type Db, inTransaction } from '../db/knex';
import { type EventRow, eventsByIds } from '../checkout/events';
import { eventIdRanges } from '../lib/id-time';
import type { DeliveryRow } from './event-deliveries';
import { DISABLE_AFTER_FAILING_MS, NOTIFY_AFTER_FAILING_MS, nextRetryAtMs } from './schedule';
import { queueState } from './queue';
import { currentTraceparent } from '../telemetry/propagation';
import { afterCommit } from '../telemetry/metrics';
import { countWebhookAttempts, webhookEndpointsDisabled, webhookEndpointsFailingNotified } from '../telemetry/webhooks';

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

/** An attempt made (or refused before sending), to record. */
export interface AttemptMade extends AttemptKey {
  event: Pick<EventRow, 'merchant_id' | 'mode'>;
  statusCode: number | null;
  error: string | null;
  /** False when nothing was tried (`endpoint_deleted`, `endpoint_disabled`): no delivered_at, no retry. */
  attempted: boolean;
  /** How long the endpoint took to answer (or to fail); absent when nothing was sent. */
  durationMs?: number | null;
  /** The start of the endpoint's answer (`responseExcerpt`); absent when it answered nothing. */
  responseBody?: string | null;
}

export const attemptKey = (k: AttemptKey) => `${k.eventId}#${k.generation}#${k.attemptNo}`;
export const droppedResult: AttemptResult = {
  outcome: 'dropped',
  statusCode: null,
  error: null,
  nextRetryAtMs: null,
  failingSinceMs: null,
};

const rowKey = (r: DeliveryRow) =>
  attemptKey({ eventId: r.event_id, generation: r.generation, attemptNo: r.attempt_no });
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

const resultOf = (row: DeliveryRow, failingSinceMs: number | null): AttemptResult => ({
  outcome: outcomeOf(row),
  statusCode: row.status_code,
  error: row.error,
  nextRetryAtMs: ms(row.next_retry_at),
  failingSinceMs,
});

async function rowsOf(db: Db, endpointId: string, keys: readonly AttemptKey[]): Promise<DeliveryRow[]> {
  if (keys.length === 0) return [];
  const days = eventIdRanges(
    'd.event_id',
    keys.map((k) => k.eventId),
  );
  const { rows } = await db.raw(
    `SELECT d.* FROM event_deliveries d
       JOIN unnest(?::text[], ?::bigint[], ?::int[]) AS k(event_id, generation, attempt_no)
         ON d.event_id = k.event_id AND d.generation = k.generation AND d.attempt_no = k.attempt_no
      WHERE d.endpoint_id = ? AND ${days.sql}`,
    [
      keys.map((k) => k.eventId),
      keys.map((k) => k.generation),
      keys.map((k) => k.attemptNo),
      endpointId,
      ...days.bindings,
    ],
  );
  return rows;
}

/**
 * Keeps `webhook_undelivered` (the `delivery_success=false` list) in step with newly recorded
 * attempts: an event's success at the endpoint removes its row; a failure (or a retry refused
 * because the endpoint is disabled) adds one unless the event was already delivered there (a
 * failed redelivery of a delivered event is not undelivered).
 */
async function trackUndelivered(db: Db, endpointId: string, rows: readonly DeliveryRow[]): Promise<void> {
  const delivered = [...new Set(rows.filter((r) => r.error === null).map((r) => r.event_id))];
  const failed = [...new Set(rows.filter((r) => r.error !== null).map((r) => r.event_id))].filter(
    (id) => !delivered.includes(id),
  );
  if (delivered.length > 0) {
    await db.raw(`DELETE FROM webhook_undelivered WHERE endpoint_id = ? AND event_id = ANY(?::text[])`, [
      endpointId,
      delivered,
    ]);
  }
  if (failed.length > 0) {
    // The events read by id within their ids' days (eventsByIds), not across every day of the log.
    const events = await eventsByIds(db, failed, ['id', 'merchant_id', 'mode', 'created_at']);
    const days = eventIdRanges('d.event_id', failed);
    await db.raw(
      `INSERT INTO webhook_undelivered (event_id, endpoint_id, merchant_id, mode, event_created_at)
       SELECT e.id, ?, e.merchant_id, e.mode, e.created_at
         FROM unnest(?::text[], ?::text[], ?::text[], ?::timestamptz[]) AS e(id, merchant_id, mode, created_at)
        WHERE NOT EXISTS (SELECT 1 FROM event_deliveries d
                           WHERE d.event_id = e.id AND d.endpoint_id = ? AND d.error IS NULL AND ${days.sql})
       ON CONFLICT DO NOTHING`,
      [
        endpointId,
        events.map((e) => e.id),
        events.map((e) => e.merchant_id),
        events.map((e) => e.mode),
        events.map((e) => new Date(e.created_at).toISOString()),
        endpointId,
        ...days.bindings,
      ],
    );
  }
}

/** Results of the attempts already recorded (an activity retry, a repeated signal), by attemptKey. */
export async function recordedAttempts(
  db: Db,
  endpointId: string,
  keys: readonly AttemptKey[],
): Promise<Map<string, AttemptResult>> {
  const rows = await rowsOf(db, endpointId, keys);
  if (rows.length === 0) return new Map();
  const since = await failingSince(db, endpointId);
  return new Map(rows.map((r) => [rowKey(r), resultOf(r, since)]));
}

/**
 * Records a batch of attempts, each made at its own `atMs` (workflow time; `attemptAtMs` when it
 * has none): one row each, failures with their retry time from the schedule, and moves the
 * endpoint's failure clock in the same transaction as if the attempts were recorded in time
 * order: the latest success stops it; failures after it (or alone) start it at the first of them,
 * unless a success as recent was already recorded. A row recorded first by someone else wins, and
 * its result is returned.
 */
export async function recordAttempts(
  db: Db,
  endpointId: string,
  attempts: ReadonlyArray<AttemptMade & { atMs?: number }>,
  attemptAtMs: number,
): Promise<Map<string, AttemptResult>> {
  if (attempts.length === 0) return new Map();
  const atOf = (a: { atMs?: number }) => a.atMs ?? attemptAtMs;
  return inTransaction(db, async (trx) => {
    const inserted: DeliveryRow[] = await trx('event_deliveries')
      .insert(
        attempts.map((a) => {
          const retry = a.error !== null && a.attempted ? nextRetryAtMs(a.attemptNo, atOf(a)) : null;
          return {
            event_id: a.eventId,
            endpoint_id: endpointId,
            generation: a.generation,
            attempt_no: a.attemptNo,
            status_code: a.statusCode,
            error: a.error,
            delivered_at: a.attempted ? new Date(atOf(a)) : null,
            next_retry_at: retry === null ? null : new Date(retry),
            duration_ms: a.durationMs ?? null,
            response_body: a.responseBody ?? null,
          };
        }),
      )
      .onConflict(['event_id', 'endpoint_id', 'generation', 'attempt_no'])
      .ignore()
      .returning('*');
    const committedAt = new Map(attempts.map((a) => [attemptKey(a), (a.event as { created_at?: Date }).created_at]));
    afterCommit(trx, () => countWebhookAttempts(inserted, (i) => committedAt.get(rowKey(inserted[i]))));
    const made = inserted.filter((r) => r.delivered_at !== null).map((r) => ({ r, at: ms(r.delivered_at)! }));
    const successes = made.filter(({ r }) => r.error === null).map(({ at }) => at);
    const lastSuccess = successes.length > 0 ? Math.max(...successes) : null;
    const laterFailures = made.filter(({ r, at }) => r.error !== null && (lastSuccess === null || at > lastSuccess));
    if (lastSuccess !== null) {
      await trx.raw(
        `UPDATE webhook_endpoints SET failing_since = NULL, last_success_at = GREATEST(last_success_at, ?) WHERE id = ?`,
        [new Date(lastSuccess), endpointId],
      );
    }
    if (laterFailures.length > 0) {
      const firstFailure = new Date(Math.min(...laterFailures.map(({ at }) => at)));
      const last = laterFailures.reduce((a, b) => (b.at >= a.at ? b : a)).r;
      await trx.raw(
        `UPDATE webhook_endpoints SET failing_since = COALESCE(failing_since, ?), last_error = ?
          WHERE id = ? AND status = 'enabled' AND (last_success_at IS NULL OR last_success_at < ?)`,
        [firstFailure, last.error, endpointId, firstFailure],
      );
    }
    await trackUndelivered(
      trx,
      endpointId,
      inserted.filter((r) => r.delivered_at !== null || r.error === 'endpoint_disabled'),
    );
    const rows = inserted.length === attempts.length ? inserted : await rowsOf(trx, endpointId, attempts);
    const since = await failingSince(trx, endpointId);
    return new Map(rows.map((r) => [rowKey(r), resultOf(r, since)]));
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
  deliveries: readonly AttemptKey[],
): Promise<number> {
  if (deliveries.length === 0) return 0;
  // The events still in the log, read within their ids' days (eventsByIds); a purged event gets no row.
  const present = new Set(
    (
      await eventsByIds(
        db,
        deliveries.map((d) => d.eventId),
        ['id'],
      )
    ).map((e) => e.id),
  );
  const kept = deliveries.filter((d) => present.has(d.eventId));
  if (kept.length === 0) return 0;
  const { rowCount } = await db.raw(
    `INSERT INTO event_deliveries (event_id, endpoint_id, generation, attempt_no, error)
     SELECT d.event_id, ?, d.generation, d.attempt_no, ?
       FROM unnest(?::text[], ?::bigint[], ?::int[]) AS d(event_id, generation, attempt_no)
     ON CONFLICT DO NOTHING`,
    [endpointId, error, kept.map((d) => d.eventId), kept.map((d) => d.generation), kept.map((d) => d.attemptNo)],
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
    afterCommit(trx, () => webhookEndpointsDisabled.inc());
    await emailContact(trx, endpoint.merchant_id, `Webhook endpoint disabled: ${endpoint.url}`, (name) => [
      `Hello ${name},`,
      '',
      `Every delivery to your ${endpoint.mode} webhook endpoint ${endpoint.id} (${endpoint.url}) has failed`,
      'for 3 days, so it has been disabled and receives no events.',
      '',
      `Fix the receiver, enable the endpoint again (PATCH /v1/webhook_endpoints/${endpoint.id} with`,
      '{"status": "enabled"}), then redeliver the events you missed (POST /v1/events/{id}/redeliver);',
      'GET /v1/events lists them.',
    ]);
    return { disabled: true, failingSinceMs: null };
  });
}

/** Puts one e-mail to the merchant's contact (when it has one) in the outbox, in the caller's transaction. */
async function emailContact(trx: Db, merchantId: string, subject: string, lines: (name: string) => string[]) {
  const merchant = await trx('merchants').where({ id: merchantId }).first('contact_email', 'display_name');
  if (!merchant?.contact_email) return;
  await trx('outbox').insert({
    kind: 'email',
    traceparent: currentTraceparent(),
    to: merchant.contact_email,
    subject,
    body: lines(merchant.display_name).join('\n'),
  });
}

/** Pending rows counted for the failing e-mail (beyond it, "more than 10,000"). */
const NOTICE_COUNT_UP_TO = 10_001;

/**
 * The 24-hour warning: if the endpoint is still enabled, has been failing since at least 24 hours
 * before `nowMs`, and got no warning in this failure streak (none since `failing_since`), marks it
 * warned and puts one e-mail to the merchant's contact in the outbox, in one transaction: which
 * endpoint, failing since when, the last error, how many events wait and when it will be disabled.
 * Returns whether this call sent it (a retry, or a second run, finds it sent and sends nothing).
 */
export async function notifyIfFailing(db: Db, endpointId: string, nowMs: number): Promise<{ notified: boolean }> {
  return db.transaction(async (trx) => {
    const [endpoint] = await trx('webhook_endpoints')
      .where({ id: endpointId, status: 'enabled' })
      .where('failing_since', '<=', new Date(nowMs - NOTIFY_AFTER_FAILING_MS))
      .where((q) => q.whereNull('failing_notified_at').orWhereRaw('failing_notified_at < failing_since'))
      .update({ failing_notified_at: new Date(nowMs) })
      .returning(['id', 'merchant_id', 'mode', 'url', 'failing_since', 'last_error']);
    if (!endpoint) return { notified: false };
    const { pending } = await queueState(trx, endpointId, NOTICE_COUNT_UP_TO);
    const since = new Date(endpoint.failing_since);
    const disableAt = new Date(since.getTime() + DISABLE_AFTER_FAILING_MS);
    const waiting =
      pending >= NOTICE_COUNT_UP_TO
        ? 'More than 10,000 events are'
        : `${pending} event${pending === 1 ? ' is' : 's are'}`;
    await emailContact(trx, endpoint.merchant_id, `Webhook endpoint failing: ${endpoint.url}`, (name) => [
      `Hello ${name},`,
      '',
      `Every delivery to your ${endpoint.mode} webhook endpoint ${endpoint.id} (${endpoint.url}) has failed`,
      `since ${since.toISOString()}. The last error: ${endpoint.last_error ?? 'unknown'}.`,
      `${waiting} waiting for it; each is retried on its schedule.`,
      '',
      `Unless a delivery succeeds first, the endpoint will be disabled at ${disableAt.toISOString()}.`,
      `GET /v1/events/{id} shows each attempt with what your endpoint answered and how long it took;`,
      'GET /v1/events?delivery_success=false lists the events it has not received.',
    ]);
    afterCommit(trx, () => webhookEndpointsFailingNotified.inc());
    return { notified: true };
  });
}

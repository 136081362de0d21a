/** Record: each attempt's row, the undelivered list, the endpoint's failure clock, its 24-hour e-mail and 3-day disable. */
import { type Db, inTransaction } from '../db/knex';
import { type EventRow, eventsByIds } from '../checkout/events';
import { eventIdRanges } from '../lib/id-time';
import type { DeliveryRow } from './event-deliveries';
import { endpointColumns, type EndpointRow } from './endpoint-row';
import { preparedQuery } from '../db/prepared';
import { DISABLE_AFTER_FAILING_MS, NOTIFY_AFTER_FAILING_MS, nextRetryAtMs } from './schedule';
import { queueState } from './queue';
import { type AttemptKey, attemptKey, type AttemptOutcome, type AttemptResult } from './attempt';
import { currentTraceparent } from '../telemetry/propagation';
import { afterCommit } from '../telemetry/metrics';
import { countWebhookAttempts, webhookEndpointsDisabled, webhookEndpointsFailingNotified } from '../telemetry/webhooks';

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
 * Adds newly recorded failures (and retries refused because the endpoint is disabled) to
 * `webhook_undelivered` (the `delivery_success=false` list) unless the event was already delivered
 * there (a failed redelivery of a delivered event is not undelivered). An event's success at the
 * endpoint removes its row as the success is inserted (INSERT_ATTEMPTS_SQL).
 */
async function addUndelivered(db: Db, endpointId: string, failedRows: readonly DeliveryRow[]): Promise<void> {
  const failed = [...new Set(failedRows.map((r) => r.event_id))];
  if (failed.length === 0) return;
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
  return inTransaction(db, async (trx) => (await recordWithEndpoint(trx, endpointId, attempts, attemptAtMs)).results);
}

/**
 * Inserts the attempts (`ON CONFLICT DO NOTHING`) and, in the same statement, takes the events
 * that succeeded off the endpoint's undelivered list. A prepared statement of fixed text: its
 * arrays carry the batch, whatever its size. It names the columns it returns: a prepared `*` fails
 * ("cached plan must not change result type") on every connection once a column is added or dropped.
 */
const INSERT_ATTEMPTS_SQL = `WITH inserted AS (
  INSERT INTO event_deliveries (event_id, endpoint_id, generation, attempt_no, status_code, error,
                                delivered_at, next_retry_at, duration_ms, response_body)
  SELECT a.event_id, $1, a.generation, a.attempt_no, a.status_code, a.error, a.delivered_at, a.next_retry_at,
         a.duration_ms, a.response_body
    FROM unnest($2::text[], $3::bigint[], $4::int[], $5::int[], $6::text[], $7::timestamptz[], $8::timestamptz[],
                $9::int[], $10::text[]) AS a(event_id, generation, attempt_no, status_code, error, delivered_at,
                                             next_retry_at, duration_ms, response_body)
  ON CONFLICT (event_id, endpoint_id, generation, attempt_no) DO NOTHING
  RETURNING event_id, endpoint_id, generation, attempt_no, status_code, error, delivered_at, next_retry_at,
            duration_ms, response_body, created_at
), delivered AS (
  DELETE FROM webhook_undelivered u USING inserted i
   WHERE u.endpoint_id = $1 AND u.event_id = i.event_id AND i.error IS NULL AND i.delivered_at IS NOT NULL
)
SELECT * FROM inserted`;

/**
 * Moves the endpoint's failure clock (see recordAttempts) in one statement, on the row as it stands
 * once locked, and returns the endpoint as it is after it (`$1` the endpoint, `$2` the latest
 * success or null, `$3` the first failure after it or null, `$4` the last failure's error): the
 * success stops the clock; the failures start it, unless the endpoint is not enabled or a success
 * as recent is recorded.
 */
const FAILURE_CLOCK_SQL = `UPDATE webhook_endpoints e
   SET last_success_at = CASE WHEN $2::timestamptz IS NULL THEN e.last_success_at ELSE GREATEST(e.last_success_at, $2) END,
       failing_since = CASE
         WHEN $3::timestamptz IS NOT NULL AND e.status = 'enabled'
              AND (GREATEST(e.last_success_at, $2) IS NULL OR GREATEST(e.last_success_at, $2) < $3)
           THEN COALESCE(CASE WHEN $2 IS NULL THEN e.failing_since END, $3)
         WHEN $2 IS NULL THEN e.failing_since
       END,
       last_error = CASE
         WHEN $3 IS NOT NULL AND e.status = 'enabled'
              AND (GREATEST(e.last_success_at, $2) IS NULL OR GREATEST(e.last_success_at, $2) < $3)
           THEN $4::text
         ELSE e.last_error
       END
 WHERE e.id = $1
RETURNING ${endpointColumns.map((c) => `e.${c}`).join(', ')}`;

/**
 * recordAttempts in the caller's transaction, also returning the endpoint as the transaction left
 * it (undefined when it is gone): the failure clock's statement returns it, so the endpoint's
 * delivery loop needs no read of its own to see it disabled, deleted or changed.
 */
export async function recordWithEndpoint(
  trx: Db,
  endpointId: string,
  attempts: ReadonlyArray<AttemptMade & { atMs?: number }>,
  attemptAtMs: number,
): Promise<{ results: Map<string, AttemptResult>; endpoint: EndpointRow | undefined }> {
  const atOf = (a: { atMs?: number }) => a.atMs ?? attemptAtMs;
  const iso = (msOrNull: number | null) => (msOrNull === null ? null : new Date(msOrNull).toISOString());
  const retryOf = (a: AttemptMade & { atMs?: number }) =>
    a.error !== null && a.attempted ? nextRetryAtMs(a.attemptNo, atOf(a)) : null;
  const { rows: inserted } = await preparedQuery<DeliveryRow>(trx, 'event_deliveries_record', INSERT_ATTEMPTS_SQL, [
    endpointId,
    attempts.map((a) => a.eventId),
    attempts.map((a) => a.generation),
    attempts.map((a) => a.attemptNo),
    attempts.map((a) => a.statusCode),
    attempts.map((a) => a.error),
    attempts.map((a) => iso(a.attempted ? atOf(a) : null)),
    attempts.map((a) => iso(retryOf(a))),
    attempts.map((a) => a.durationMs ?? null),
    attempts.map((a) => a.responseBody ?? null),
  ]);
  const committedAt = new Map(attempts.map((a) => [attemptKey(a), (a.event as { created_at?: Date }).created_at]));
  afterCommit(trx, () => countWebhookAttempts(inserted, (i) => committedAt.get(rowKey(inserted[i]))));
  const made = inserted.filter((r) => r.delivered_at !== null).map((r) => ({ r, at: ms(r.delivered_at)! }));
  const successes = made.filter(({ r }) => r.error === null).map(({ at }) => at);
  const lastSuccess = successes.length > 0 ? Math.max(...successes) : null;
  const laterFailures = made.filter(({ r, at }) => r.error !== null && (lastSuccess === null || at > lastSuccess));
  const firstFailure = laterFailures.length > 0 ? Math.min(...laterFailures.map(({ at }) => at)) : null;
  const lastError = laterFailures.length > 0 ? laterFailures.reduce((a, b) => (b.at >= a.at ? b : a)).r.error : null;
  const { rows: endpoints } =
    lastSuccess === null && firstFailure === null
      ? await preparedQuery<EndpointRow>(
          trx,
          'webhook_endpoint_by_id',
          `SELECT ${endpointColumns.join(', ')} FROM webhook_endpoints WHERE id = $1`,
          [endpointId],
        )
      : await preparedQuery<EndpointRow>(trx, 'webhook_endpoint_failure_clock', FAILURE_CLOCK_SQL, [
          endpointId,
          lastSuccess === null ? null : new Date(lastSuccess),
          firstFailure === null ? null : new Date(firstFailure),
          lastError,
        ]);
  const endpoint = endpoints[0];
  await addUndelivered(
    trx,
    endpointId,
    inserted.filter((r) => r.error !== null && (r.delivered_at !== null || r.error === 'endpoint_disabled')),
  );
  const rows = inserted.length === attempts.length ? inserted : await rowsOf(trx, endpointId, attempts);
  const since = endpoint?.status === 'enabled' ? ms(endpoint.failing_since) : null;
  return { results: new Map(rows.map((r) => [rowKey(r), resultOf(r, since)])), endpoint };
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
 * `beforeCommit` runs last in the transaction when it wrote: the caller's fence (it throws to roll
 * the writes back, e.g. an activity past its deadline).
 */
export async function disableIfStillFailing(
  db: Db,
  endpointId: string,
  nowMs: number,
  beforeCommit?: () => void,
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
    beforeCommit?.();
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
 * `beforeCommit` as for disableIfStillFailing.
 */
export async function notifyIfFailing(
  db: Db,
  endpointId: string,
  nowMs: number,
  beforeCommit?: () => void,
): Promise<{ notified: boolean }> {
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
    beforeCommit?.();
    afterCommit(trx, () => webhookEndpointsFailingNotified.inc());
    return { notified: true };
  });
}

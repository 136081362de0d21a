/** Queue and claim: the `webhook_queue` statements (enqueue, claim due rows, advance once recorded, cancel, state). */
import type { Db } from '../db/knex';
import { preparedQuery, unpreparedQuery } from '../db/prepared';
import { eventIdRanges } from '../lib/id-time';
import { type AttemptKey, attemptKey, type AttemptResult } from './attempt';

/**
 * The webhook delivery queue in Postgres (`webhook_queue`): one row per pending (event, endpoint,
 * generation) with its next attempt and when it is due. The dispatcher, redelivery and replay
 * insert rows; the endpoint's workflow only decides when to look, and its `deliverDue` activity
 * claims due rows, sends them and, in the transaction that records the attempt, moves each to its
 * retry or deletes it (20261126030000_pending_queue: the table is as large as the backlog).
 */

/**
 * A claimed row lapses after this long (the batch died without recording): it is due again. Twice
 * the delivery activity's start-to-close timeout, so an attempt that is still running is never
 * past its lease: a lapsed lease means the attempt is over, and its writes are fenced.
 */
export const CLAIM_LEASE_MS = 2 * 60_000;

/**
 * A claimed row: its key, and the lease end the claim wrote into `next_attempt_at`. The claim's
 * fencing token: a later claim of the row (another batch, or this batch's retry taking back what it
 * held) writes another lease end, so `claim` and `next_attempt_at` together say whose it is.
 */
export interface ClaimedKey extends AttemptKey {
  leaseEndMs: number;
}

/** A row to queue: attempt 1 of `eventId` to `endpointId`. */
export interface QueueEntry {
  eventId: string;
  endpointId: string;
}

/**
 * Queues attempt 1 of each entry in `generation`, due now (the database's clock: never later than
 * workflow time); an entry already queued in that generation is left as it is: still pending (its
 * row), or attempted (its attempts, recorded in the transaction that deleted its row), so an event
 * dispatched twice is delivered once. Returns how many rows each endpoint got.
 */
export async function enqueue(
  db: Db,
  entries: readonly QueueEntry[],
  generation: number,
): Promise<Map<string, number>> {
  const counts = new Map<string, number>();
  if (entries.length === 0) return counts;
  const days = eventIdRanges(
    'd.event_id',
    entries.map((e) => e.eventId),
  );
  const { rows } = await db.raw(
    `INSERT INTO webhook_queue (event_id, endpoint_id, generation, next_attempt_at)
     SELECT q.event_id, q.endpoint_id, ?, now() FROM unnest(?::text[], ?::text[]) AS q(event_id, endpoint_id)
      WHERE NOT EXISTS (SELECT 1 FROM event_deliveries d
                         WHERE d.event_id = q.event_id AND d.endpoint_id = q.endpoint_id AND d.generation = ?
                           -- Planned over the days of these ids only.
                           AND ${days.sql})
     ON CONFLICT DO NOTHING
     RETURNING endpoint_id`,
    [generation, entries.map((e) => e.eventId), entries.map((e) => e.endpointId), generation, ...days.bindings],
  );
  for (const { endpoint_id: id } of rows as Array<{ endpoint_id: string }>) counts.set(id, (counts.get(id) ?? 0) + 1);
  return counts;
}

/**
 * Adopts deliveries that were pending elsewhere (the old workflow type's queue) at their attempt and
 * due time; one whose attempt is already recorded (a retried adoption after the row was sent and
 * deleted) is not queued again.
 */
export async function adopt(
  db: Db,
  endpointId: string,
  pending: ReadonlyArray<AttemptKey & { dueAtMs: number }>,
): Promise<number> {
  if (pending.length === 0) return 0;
  const days = eventIdRanges(
    'd.event_id',
    pending.map((p) => p.eventId),
  );
  const { rowCount } = await db.raw(
    `INSERT INTO webhook_queue (event_id, endpoint_id, generation, attempt_no, next_attempt_at)
     SELECT p.event_id, ?, p.generation, p.attempt_no, to_timestamp(p.due_ms / 1000.0)
       FROM unnest(?::text[], ?::bigint[], ?::int[], ?::bigint[]) AS p(event_id, generation, attempt_no, due_ms)
       JOIN events e ON e.id = p.event_id
      WHERE NOT EXISTS (SELECT 1 FROM event_deliveries d
                         WHERE d.event_id = p.event_id AND d.endpoint_id = ? AND d.generation = p.generation
                           AND d.attempt_no >= p.attempt_no AND ${days.sql})
     ON CONFLICT DO NOTHING`,
    [
      endpointId,
      pending.map((p) => p.eventId),
      pending.map((p) => p.generation),
      pending.map((p) => p.attemptNo),
      pending.map((p) => p.dueAtMs),
      endpointId,
      ...days.bindings,
    ],
  );
  return rowCount ?? 0;
}

/**
 * The claim (`$1` endpoint, `$2` batch, `$3` held rows to take back, `$4` now, `$5` limit, `$6`
 * the lease's end), planned on each call with its values (a cached generic plan of it is at the
 * mercy of the queue's statistics: it may take the all-endpoints due index, or sort every due row
 * of a backlog on each claim). The events are read after, by id within their ids' days
 * (eventsByIds: the days are known when it is planned, so it is planned over those alone; joined
 * here, it was planned over every day of the event log, 4 ms a claim).
 */
export const CLAIM_SQL = `WITH held AS (
  SELECT ctid FROM webhook_queue WHERE claim = $2 AND endpoint_id = $1 LIMIT $3 FOR UPDATE
), due AS (
  SELECT ctid FROM webhook_queue
   WHERE endpoint_id = $1 AND next_attempt_at <= $4
   ORDER BY next_attempt_at
   LIMIT $5
   FOR UPDATE SKIP LOCKED
), picked AS (
  SELECT * FROM held UNION SELECT * FROM due LIMIT $5
), claimed AS (
  -- By the locked rows' tuple ids: a join on the key lets a stale row estimate (the queue
  -- grows fast) plan a walk over every pending row of the endpoint. The lease runs at least
  -- CLAIM_LEASE_MS by the database's clock (a worker's clock behind it shortens no lease).
  UPDATE webhook_queue q SET claim = $2,
         next_attempt_at = GREATEST($6::timestamptz, now() + interval '${CLAIM_LEASE_MS / 1000} seconds')
   WHERE q.ctid = ANY (ARRAY(SELECT ctid FROM picked)) AND q.endpoint_id = $1
  RETURNING q.event_id, q.generation, q.attempt_no, q.next_attempt_at AS lease_end
)
-- No wait for the WAL flush: a claim lost in a crash only makes its rows due again (their
-- attempt is sent again, as after a worker crash), and the recording's commit flushes it.
SELECT set_config('synchronous_commit', 'off', true) AS async_commit, event_id, generation, attempt_no, lease_end
  FROM claimed`;

/**
 * Claims up to `limit` of the endpoint's rows due at `nowMs` for `batch`, earliest first, and
 * pushes their due time out by the lease; rows `batch` already holds (a retried activity whose
 * first try died after sending) come first, so their attempt is sent again rather than skipped.
 * `held: false` leaves out the rows `batch` holds (its own attempts still sending, after its
 * first claim).
 */
export async function claimDue(
  db: Db,
  endpointId: string,
  batch: string,
  nowMs: number,
  limit: number,
  held = true,
): Promise<ClaimedKey[]> {
  const { rows } = await unpreparedQuery<{ event_id: string; generation: string; attempt_no: number; lease_end: Date }>(
    db,
    CLAIM_SQL,
    [endpointId, batch, held ? limit : 0, new Date(nowMs), limit, new Date(nowMs + CLAIM_LEASE_MS)],
  );
  return rows.map((r) => ({
    eventId: r.event_id,
    generation: Number(r.generation),
    attemptNo: r.attempt_no,
    // timestamptz(3): the value written is the value read, to the millisecond.
    leaseEndMs: new Date(r.lease_end).getTime(),
  }));
}

/**
 * The fence of a recording (run first in its transaction): locks the rows of `claimed` that are
 * still this claim's (held by `batch` at the claimed attempt, with the lease end the claim wrote,
 * not yet lapsed by the database's clock) and returns their attemptKeys. The others were taken
 * back after their lease lapsed (by another batch, or by this batch's retry) or are gone: their
 * attempts must not be recorded by this writer.
 */
export async function stillClaimed(
  db: Db,
  endpointId: string,
  batch: string,
  claimed: readonly ClaimedKey[],
): Promise<Set<string>> {
  if (claimed.length === 0) return new Set();
  const { rows } = await preparedQuery<{ event_id: string; generation: string; attempt_no: number }>(
    db,
    'webhook_queue_still_claimed',
    `SELECT q.event_id, q.generation, q.attempt_no
       FROM webhook_queue q
       JOIN unnest($1::text[], $2::bigint[], $3::int[], $4::timestamptz[]) AS k(event_id, generation, attempt_no, lease_end)
         ON q.event_id = k.event_id AND q.generation = k.generation AND q.attempt_no = k.attempt_no
      WHERE q.endpoint_id = $5 AND q.claim = $6 AND q.next_attempt_at = k.lease_end AND q.next_attempt_at > now()
        FOR UPDATE OF q`,
    [
      claimed.map((c) => c.eventId),
      claimed.map((c) => c.generation),
      claimed.map((c) => c.attemptNo),
      claimed.map((c) => new Date(c.leaseEndMs)),
      endpointId,
      batch,
    ],
  );
  return new Set(
    rows.map((r) => attemptKey({ eventId: r.event_id, generation: Number(r.generation), attemptNo: r.attempt_no })),
  );
}

/**
 * Moves claimed rows on after their attempts were recorded (in the same transaction): to the next
 * attempt and its due time after a failure with a retry left, otherwise out of the queue
 * (delivered, failed after the last attempt, or cancelled when nothing was tried: the attempts
 * stay recorded in `event_deliveries`). Only rows still held by `batch` at that attempt move.
 */
export async function advance(
  db: Db,
  endpointId: string,
  batch: string,
  done: ReadonlyArray<{ key: AttemptKey; result: AttemptResult }>,
): Promise<void> {
  if (done.length === 0) return;
  const nextMs = ({ result }: { result: AttemptResult }) =>
    result.outcome === 'failed' && result.nextRetryAtMs !== null ? String(result.nextRetryAtMs) : null;
  await preparedQuery(db, 'webhook_queue_advance', ADVANCE_SQL, [
    done.map((d) => d.key.eventId),
    done.map((d) => d.key.generation),
    done.map((d) => d.key.attemptNo),
    done.map(nextMs),
    endpointId,
    batch,
  ]);
}

/**
 * Moves recorded rows on (`advance`): a retry's row to its next attempt, the others deleted. A
 * prepared statement: its key lookups plan the same whatever the values.
 */
const ADVANCE_SQL = `WITH d AS (
  SELECT * FROM unnest($1::text[], $2::bigint[], $3::int[], $4::bigint[]) AS d(event_id, generation, attempt_no, next_ms)
), retried AS (
  UPDATE webhook_queue q
     SET attempt_no = q.attempt_no + 1, next_attempt_at = to_timestamp(d.next_ms / 1000.0), claim = NULL
    FROM d
   WHERE d.next_ms IS NOT NULL AND q.event_id = d.event_id AND q.endpoint_id = $5
     AND q.generation = d.generation AND q.attempt_no = d.attempt_no AND q.claim = $6
), over AS (
  DELETE FROM webhook_queue q USING d
   WHERE d.next_ms IS NULL AND q.event_id = d.event_id AND q.endpoint_id = $5
     AND q.generation = d.generation AND q.attempt_no = d.attempt_no AND q.claim = $6
)
SELECT 1`;

/**
 * Takes claimed rows whose event is gone (purged) out of the queue: there is nothing to send or
 * record. Only rows still this claim's (as stillClaimed) go; returns how many did not (fenced).
 */
export async function dropClaimed(
  db: Db,
  endpointId: string,
  batch: string,
  keys: readonly ClaimedKey[],
): Promise<number> {
  if (keys.length === 0) return 0;
  const { rowCount } = await db.raw(
    `DELETE FROM webhook_queue q USING unnest(?::text[], ?::bigint[], ?::timestamptz[]) AS k(event_id, generation, lease_end)
      WHERE q.event_id = k.event_id AND q.endpoint_id = ? AND q.generation = k.generation AND q.claim = ?
        AND q.next_attempt_at = k.lease_end AND q.next_attempt_at > now()`,
    [
      keys.map((k) => k.eventId),
      keys.map((k) => k.generation),
      keys.map((k) => new Date(k.leaseEndMs)),
      endpointId,
      batch,
    ],
  );
  return keys.length - (rowCount ?? 0);
}

/**
 * Takes up to `limit` of the endpoint's pending rows out of the queue and returns them, for
 * recording as `endpoint_deleted`; held rows included (the endpoint is gone).
 */
export async function takePending(db: Db, endpointId: string, limit: number): Promise<AttemptKey[]> {
  const { rows } = await db.raw(
    `DELETE FROM webhook_queue
      WHERE ctid = ANY (ARRAY(SELECT ctid FROM webhook_queue WHERE endpoint_id = ?
                               ORDER BY next_attempt_at LIMIT ? FOR UPDATE))
        AND endpoint_id = ?
     RETURNING event_id, generation, attempt_no`,
    [endpointId, limit, endpointId],
  );
  return (rows as Array<{ event_id: string; generation: string; attempt_no: number }>).map((r) => ({
    eventId: r.event_id,
    generation: Number(r.generation),
    attemptNo: r.attempt_no,
  }));
}

/** What the endpoint's queue holds: when the next row is due (claims included) and how many are pending (counted up to `countUpTo`). */
export async function queueState(
  db: Db,
  endpointId: string,
  countUpTo: number,
): Promise<{ nextDueAtMs: number | null; pending: number }> {
  const { rows } = await db.raw(
    `SELECT (SELECT min(next_attempt_at) FROM webhook_queue WHERE endpoint_id = ?) AS next_due,
            (SELECT count(*) FROM (SELECT 1 FROM webhook_queue WHERE endpoint_id = ? LIMIT ?) c) AS pending`,
    [endpointId, endpointId, countUpTo],
  );
  const [row] = rows as Array<{ next_due: Date | null; pending: string }>;
  return { nextDueAtMs: row.next_due ? new Date(row.next_due).getTime() : null, pending: Number(row.pending) };
}

/**
 * Endpoints with a row overdue by more than `overdueMs` (by the database's clock): their
 * workflow did not pick it up (a wake signal lost to a crash after commit, or an ended run), so
 * the dispatcher's sweep wakes them again.
 */
export async function overdueEndpoints(
  db: Db,
  overdueMs: number,
  merchantIds?: ReadonlySet<string>,
): Promise<string[]> {
  const query = db('webhook_endpoints as e')
    .whereExists((q) =>
      q
        .select(db.raw('1'))
        .from('webhook_queue as q')
        .whereRaw('q.endpoint_id = e.id')
        .whereRaw(`q.next_attempt_at < now() - make_interval(secs => ?)`, [overdueMs / 1000]),
    )
    .pluck('e.id');
  if (merchantIds) query.whereIn('e.merchant_id', [...merchantIds]);
  return query;
}

/** Queue rows deleted per statement by the janitor's purge. */
const PURGE_BATCH = 5_000;

/**
 * Deletes the rows of events made before `cutoffMs` (past retention: normally none, as retries end
 * after three days), by id range through the primary key (ids are time-ordered, live ones sorting
 * before `evt_test_`), at most PURGE_BATCH a statement; returns how many.
 */
export async function purgeBefore(db: Db, cutoffMs: number, maxBatches: number): Promise<number> {
  let total = 0;
  for (let i = 0; i < maxBatches; i++) {
    const { rowCount } = await db.raw(
      `DELETE FROM webhook_queue WHERE ctid = ANY (ARRAY(
         SELECT ctid FROM webhook_queue
          WHERE event_id < event_log_id_bound('evt_', ?::timestamptz)
             OR (event_id >= 'evt_test_' AND event_id < event_log_id_bound('evt_test_', ?::timestamptz))
          LIMIT ${PURGE_BATCH}))`,
      [new Date(cutoffMs), new Date(cutoffMs)],
    );
    total += rowCount ?? 0;
    if ((rowCount ?? 0) < PURGE_BATCH) break;
  }
  return total;
}

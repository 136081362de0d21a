/**
 * An endpoint's delivery attempts as its console page lists them: newest first, a page at a time
 * behind a keyset cursor, optionally only the delivered, pending or failed ones, within the event
 * log's 30 days. Read through `event_deliveries_by_endpoint` (endpoint_id, created_at) in each of
 * the endpoint's mode's days (migrations/20261201100000_delivery_endpoint_index.ts).
 */
import type { Knex } from 'knex';
import type { Db } from '../db/knex';
import { decodeCursor, encodeCursor } from '../http/cursor';
import { ApiError } from '../http/errors';
import type { KeyMode } from '../keys/keys';
import { base32 } from '../lib/id-time';
import type { DeliveryRow } from '../webhooks/event-deliveries';

/** Attempts a page shows. */
export const DELIVERIES_PER_PAGE = 50;
/** The event log's retention: older attempts are not shown. */
const RETENTION_MS = 30 * 86_400_000;
const CURSOR_LIST = 'console_deliveries';

export const deliveryStates = ['delivered', 'pending', 'failed'] as const;
export type DeliveryState = (typeof deliveryStates)[number];

/** An attempt as the list shows it: its row, and whether a later attempt of its delivery was made. */
export type ListedDelivery = DeliveryRow & { retried: boolean };

/**
 * An attempt as delivered (2xx), pending (failed, and its retry is still to come) or failed (no
 * retry left, or the retry made: a later attempt of the same delivery exists).
 */
export function deliveryState(d: Pick<ListedDelivery, 'status_code' | 'next_retry_at' | 'retried'>): DeliveryState {
  if (d.status_code !== null && d.status_code >= 200 && d.status_code < 300) return 'delivered';
  return d.next_retry_at && !d.retried ? 'pending' : 'failed';
}

/**
 * A later attempt of the row's delivery (same event, endpoint and generation), read on the primary
 * key; bound to the list's own event-id range (two bindings) so that the planner prunes the
 * other days and the other mode's as it does for the list.
 */
const RETRIED_SQL = `EXISTS (SELECT 1 FROM event_deliveries later
  WHERE later.event_id = event_deliveries.event_id AND later.endpoint_id = event_deliveries.endpoint_id
    AND later.generation = event_deliveries.generation AND later.attempt_no > event_deliveries.attempt_no
    AND later.event_id >= ? AND later.event_id < ?)`;

/** `deliveryState` as SQL, for the filters (pending and failed take RETRIED_SQL's two bindings). */
const NOT_2XX = '(status_code IS NULL OR status_code NOT BETWEEN 200 AND 299)';
const STATE_SQL: Record<DeliveryState, string> = {
  delivered: 'status_code BETWEEN 200 AND 299',
  pending: `${NOT_2XX} AND next_retry_at IS NOT NULL AND NOT ${RETRIED_SQL}`,
  failed: `${NOT_2XX} AND (next_retry_at IS NULL OR ${RETRIED_SQL})`,
};

/** Where a page starts: after the attempt with this (created_at, event_id, generation, attempt_no). */
export interface DeliveryKey {
  createdAt: string;
  eventId: string;
  generation: number;
  attemptNo: number;
}

const invalidCursor = () =>
  ApiError.validation('cursor is not a cursor from this list.', [{ field: 'cursor', issue: 'invalid' }]);

/** The cursor of a page link; a 400 ApiError when it is not one this list wrote. */
export function deliveryCursor(raw: string | undefined): DeliveryKey | undefined {
  if (!raw) return undefined;
  const [createdAt, eventId, generation, attemptNo] = decodeCursor(CURSOR_LIST, raw, invalidCursor);
  const isTime =
    typeof createdAt === 'string' &&
    !Number.isNaN(Date.parse(createdAt)) &&
    new Date(createdAt).toISOString() === createdAt;
  if (
    !isTime ||
    typeof eventId !== 'string' ||
    !/^evt_[a-z0-9_]{1,60}$/.test(eventId) ||
    !Number.isSafeInteger(generation) ||
    !Number.isSafeInteger(attemptNo)
  )
    throw invalidCursor();
  return { createdAt, eventId, generation: generation as number, attemptNo: attemptNo as number };
}

const cursorOf = (d: DeliveryRow) =>
  encodeCursor(CURSOR_LIST, [new Date(d.created_at).toISOString(), d.event_id, d.generation, d.attempt_no]);

/**
 * The query of one page (one row more than a page, to learn whether another follows), for the
 * endpoint `endpointId` of `mode` (whose owner the caller has checked).
 */
export function deliveriesQuery(
  db: Db,
  input: { endpointId: string; mode: KeyMode; now: Date; state?: DeliveryState; after?: DeliveryKey },
): Knex.QueryBuilder {
  // The mode's days only (event ids are `evt_…` or `evt_test_…`, then their time: live ids sort
  // below `evt_test_`), from the retention's start on: the planner prunes the other partitions.
  const since = new Date(input.now.getTime() - RETENTION_MS);
  const prefix = input.mode === 'test' ? 'evt_test_' : 'evt_';
  const ids = [
    `${prefix}${base32(since.getTime() - 86_400_000, 10)}`,
    input.mode === 'test' ? 'evt_test_~' : 'evt_test_',
  ];
  const query = db('event_deliveries')
    .where({ endpoint_id: input.endpointId })
    .where('event_id', '>=', ids[0])
    .where('event_id', '<', ids[1])
    .where('created_at', '>=', since)
    .orderBy([
      { column: 'created_at', order: 'desc' },
      { column: 'event_id', order: 'desc' },
      { column: 'generation', order: 'desc' },
      { column: 'attempt_no', order: 'desc' },
    ])
    .limit(DELIVERIES_PER_PAGE + 1)
    .select(
      'event_id',
      'endpoint_id',
      'generation',
      'attempt_no',
      'status_code',
      'error',
      'delivered_at',
      'next_retry_at',
      'duration_ms',
      'response_body',
      'created_at',
      db.raw(`${RETRIED_SQL} AS retried`, ids),
    );
  if (input.state) query.whereRaw(STATE_SQL[input.state], input.state === 'delivered' ? [] : ids);
  if (input.after) {
    const a = input.after;
    // The bound on the time alone is what the index range reads; the row comparison settles ties.
    query.whereRaw(
      `created_at <= ?::timestamptz AND (created_at, event_id, generation, attempt_no) < (?::timestamptz, ?, ?::bigint, ?::integer)`,
      [a.createdAt, a.createdAt, a.eventId, a.generation, a.attemptNo],
    );
  }
  return query;
}

/** One page of the endpoint's attempts, and the cursor of the next (null on the last). */
export async function listDeliveries(
  db: Db,
  input: Parameters<typeof deliveriesQuery>[1],
): Promise<{ rows: ListedDelivery[]; nextCursor: string | null }> {
  const rows: ListedDelivery[] = await deliveriesQuery(db, input);
  const page = rows.slice(0, DELIVERIES_PER_PAGE);
  return { rows: page, nextCursor: rows.length > DELIVERIES_PER_PAGE ? cursorOf(page[page.length - 1]) : null };
}

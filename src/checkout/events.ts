import type { Knex } from 'knex';
import type { Db } from '../db/knex';
import type { KeyMode } from '../keys/keys';
import { idTime, newId } from '../lib/ids';
import { isObjectId } from './ids';
import { type Keyset, newestFirst, type Page } from './cursor';
import { currentTraceparent } from '../telemetry/propagation';
import { decodeEventRow, packPayload } from './event-payload';

/** Event types this service emits (new ones may be added inside v1). */
export const eventTypes = [
  'checkout.session.completed',
  'checkout.session.expired',
  'checkout.session.canceled',
  'payment.attempt.failed',
  'refund.succeeded',
  'refund.failed',
  'customer.instrument.saved',
  'customer.instrument.revoked',
] as const;
export type EventType = (typeof eventTypes)[number];

/** Where an event's created_at is looked for first, around its id's time (see getEvent). */
const ID_TIME_BEFORE_MS = 24 * 60 * 60 * 1000;
const ID_TIME_AFTER_MS = 60 * 60 * 1000;

/** How long the event log keeps events (at least: a day goes once it is wholly older). */
export const EVENT_RETENTION_MS = 30 * 24 * 60 * 60 * 1000;

export interface EventRow {
  id: string;
  merchant_id: string;
  mode: KeyMode;
  type: string;
  data_object: unknown;
  created_at: Date;
  /** The trace that recorded the event (its webhook deliveries continue it); null when tracing is off. */
  traceparent?: string | null;
}

/** The Postgres channel on which a recorded event's id is announced, delivered only on commit. */
export const EVENTS_CHANNEL = 'svc_events';

/**
 * Records one event in the caller's transaction: the transition and its event commit together
 * or not at all (transactional outbox). Its id is announced on EVENTS_CHANNEL when (and only if)
 * the transaction commits, so webhook fan-out starts at once without the caller's help.
 */
export async function recordEvent(
  trx: Db,
  input: { merchantId: string; mode: KeyMode; type: EventType; object: unknown; now: Date },
): Promise<EventRow> {
  const [row] = await trx('events')
    .insert({
      id: newId('evt', input.mode === 'test' ? 'test' : undefined),
      merchant_id: input.merchantId,
      mode: input.mode,
      type: input.type,
      payload: packPayload(input.object),
      created_at: input.now,
      traceparent: currentTraceparent(),
    })
    .returning(['id', 'merchant_id', 'mode', 'type', 'created_at', 'traceparent']);
  await trx.raw('SELECT pg_notify(?, ?)', [EVENTS_CHANNEL, row.id]);
  // What a read returns: the object as JSON has it (dates as strings).
  return { ...row, data_object: JSON.parse(JSON.stringify(input.object)) };
}

/** The Event object; the single read adds `deliveries`. */
export function eventOut(row: EventRow) {
  return {
    id: row.id,
    object: 'event',
    type: row.type,
    livemode: row.mode === 'live',
    created_at: new Date(row.created_at).toISOString(),
    data: { object: row.data_object },
  };
}

/** The retention cutoff the janitor moves hourly (src/checkout/event-log.ts), as SQL. */
const cutoff = (db: Db) => db.raw('(SELECT cutoff FROM event_log_retention)');

/**
 * Events the log still shows: created at or after the retention cutoff; storage goes a whole day
 * later, with its partition.
 */
const retained = (db: Db) => (q: Knex.QueryBuilder) => q.where('created_at', '>=', cutoff(db));

/**
 * A tenant's events (a merchant's in one mode), of one type if given, as the list indexes find
 * them (migrations/20261126040000_event_list_keys.ts): by the hash of merchant, mode (and type)
 * they are keyed by, and by the columns themselves, which settle what the hash does not.
 */
export const listedEvents = (db: Db, scope: { merchantId: string; mode: KeyMode }, type?: string) => {
  const query = db('events').where({ merchant_id: scope.merchantId, mode: scope.mode });
  if (type === undefined) {
    return query.whereRaw('event_list_key(merchant_id, mode) = event_list_key(?, ?)', [scope.merchantId, scope.mode]);
  }
  return query
    .where({ type })
    .whereRaw('event_list_key(merchant_id, mode, type) = event_list_key(?, ?, ?)', [
      scope.merchantId,
      scope.mode,
      type,
    ]);
};

/** How `GET /events` pages through the merchant's events. */
export interface EventListOptions {
  type?: string;
  since?: Date;
  /** Only events created before this time (the console's date range; `GET /events` has no such filter). */
  until?: Date;
  /** false: events some endpoint waits for after a failure; true: events no endpoint waits for that way. */
  deliverySuccess?: boolean;
  after?: Keyset;
  limit: number;
  order?: 'desc' | 'asc';
}

/**
 * One page of the merchant's events in `mode`, newest first (or oldest first for `asc`). With
 * `deliverySuccess: false` the page is read from `webhook_undelivered`'s list index (its own copy
 * of each event's time), so its cost follows the undelivered events, never the event log's size.
 */
export async function listEvents(db: Db, scope: { merchantId: string; mode: KeyMode }, opts: EventListOptions) {
  if (opts.deliverySuccess === false) return listUndelivered(db, scope, opts);
  const query = listedEvents(db, scope, opts.type).where(retained(db));

  if (opts.since !== undefined) query.andWhere('created_at', '>=', opts.since);
  if (opts.until !== undefined) query.andWhere('created_at', '<', opts.until);
  if (opts.deliverySuccess === true) {
    query.whereNotExists((q) =>
      q.select(db.raw('1')).from('webhook_undelivered as u').whereRaw('u.event_id = events.id'),
    );
  }
  return decodePage(await newestFirst<EventRow>(query, opts.after, opts.limit, opts.order));
}

const decodePage = (page: Page<EventRow>): Page<EventRow> => ({ ...page, rows: page.rows.map(decodeEventRow) });

async function listUndelivered(db: Db, scope: { merchantId: string; mode: KeyMode }, opts: EventListOptions) {
  const order = opts.order ?? 'desc';
  // Ordered inside as well: the planner then reads the index in the page's direction, never sorts.
  const undelivered = db('webhook_undelivered')
    .distinct('event_created_at', 'event_id')
    .where({ merchant_id: scope.merchantId, mode: scope.mode })
    // Rows of events past retention go in the janitor's next sweep; hidden from the cutoff on.
    .andWhere('event_created_at', '>=', cutoff(db))
    .orderBy([
      { column: 'event_created_at', order },
      { column: 'event_id', order },
    ]);
  if (opts.since !== undefined) undelivered.andWhere('event_created_at', '>=', opts.since);
  if (opts.until !== undefined) undelivered.andWhere('event_created_at', '<', opts.until);
  const query = db
    .from(undelivered.as('u'))
    // On the event's time too: each row's lookup then reads only its day's partition.
    .join('events as e', (j) => j.on('e.id', 'u.event_id').andOn('e.created_at', 'u.event_created_at'))
    .select('e.*')
    .where({ 'e.merchant_id': scope.merchantId, 'e.mode': scope.mode });
  if (opts.type !== undefined) query.andWhere('e.type', opts.type);
  return decodePage(
    await newestFirst<EventRow>(query, opts.after, opts.limit, order, ['u.event_created_at', 'u.event_id']),
  );
}

/**
 * Where the events with these ids were created, as bounds on created_at that prune the event log
 * to the ids' days: from a day before the earliest id's time to an hour after the latest (an id is
 * made when its event is written; created_at is the transition's time, a little before). Null
 * when an id carries no time.
 */
export function idTimeBounds(ids: readonly string[]): [Date, Date] | null {
  const times = ids.map(idTime);
  if (times.length === 0 || times.some((t) => t === null)) return null;
  const known = times as number[];
  return [new Date(Math.min(...known) - ID_TIME_BEFORE_MS), new Date(Math.max(...known) + ID_TIME_AFTER_MS)];
}

/**
 * The events with these ids (any merchant: for internal paths that hold ids from the queue),
 * `data_object` decoded. Looked for within idTimeBounds first (one or two days); the ids not found
 * there (an event whose created_at is far from its id's time, or one purged) are looked for in
 * every day.
 */
export async function eventsByIds(
  db: Db,
  ids: readonly string[],
  columns: readonly string[] = ['*'],
): Promise<EventRow[]> {
  const wanted = [...new Set(ids)];
  if (wanted.length === 0) return [];
  const bounds = idTimeBounds(wanted);
  const read = (some: string[]) =>
    db('events')
      .whereIn('id', some)
      .select(...columns);
  const near: EventRow[] = bounds ? await read(wanted).whereBetween('created_at', bounds) : [];
  const found = new Set(near.map((e) => e.id));
  const rest = wanted.filter((id) => !found.has(id));
  const far: EventRow[] = rest.length > 0 ? await read(rest) : [];
  return [...near, ...far].map(decodeEventRow);
}

/** Claimed queue rows (src/webhooks/queue.ts claimDue) with their events (absent when purged). */
export async function withClaimedEvents<T extends { eventId: string }>(
  db: Db,
  claimed: readonly T[],
): Promise<Array<T & { event: EventRow | undefined }>> {
  const events = new Map(
    (
      await eventsByIds(
        db,
        claimed.map((c) => c.eventId),
      )
    ).map((e) => [e.id, e]),
  );
  return claimed.map((c) => ({ ...c, event: events.get(c.eventId) }));
}

/** The merchant's event in `mode`, or null (another merchant's or mode's is null too). */
export async function getEvent(
  db: Db,
  scope: { merchantId: string; mode: KeyMode },
  id: string,
): Promise<EventRow | null> {
  if (!isObjectId(id)) return null;
  const query = () => db('events').where({ id, merchant_id: scope.merchantId, mode: scope.mode }).where(retained(db));
  // The id's clock part is when it was made, close after the event's created_at (the transition's
  // time): looking there first reads one or two daily partitions. An id whose time is far off (or
  // not ours) is looked up in every partition.
  const madeAt = idTime(id);
  if (madeAt !== null) {
    const near = await query()
      .whereBetween('created_at', [new Date(madeAt - ID_TIME_BEFORE_MS), new Date(madeAt + ID_TIME_AFTER_MS)])
      .first();
    if (near) return decodeEventRow(near as EventRow);
  }
  const far = await query().first();
  return far ? decodeEventRow(far as EventRow) : null;
}

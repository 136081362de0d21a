import type { Knex } from 'knex';
import type { Db } from '../db/knex';
import type { KeyMode } from '../keys/keys';
import { idTime, newId } from '../lib/ids';
import { isObjectId } from './ids';
import { type Keyset, newestFirst } from './cursor';
import { currentTraceparent } from '../telemetry/propagation';

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
      data_object: JSON.stringify(input.object),
      created_at: input.now,
      traceparent: currentTraceparent(),
    })
    .returning('*');
  await trx.raw('SELECT pg_notify(?, ?)', [EVENTS_CHANNEL, row.id]);
  return row;
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

/** How `GET /events` pages through the merchant's events. */
export interface EventListOptions {
  type?: string;
  since?: Date;
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
  const query = db('events').where({ merchant_id: scope.merchantId, mode: scope.mode }).where(retained(db));

  if (opts.type !== undefined) query.andWhere({ type: opts.type });
  if (opts.since !== undefined) query.andWhere('created_at', '>=', opts.since);
  if (opts.deliverySuccess === true) {
    query.whereNotExists((q) =>
      q.select(db.raw('1')).from('webhook_undelivered as u').whereRaw('u.event_id = events.id'),
    );
  }
  return newestFirst<EventRow>(query, opts.after, opts.limit, opts.order);
}

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
  const query = db
    .from(undelivered.as('u'))
    // On the event's time too: each row's lookup then reads only its day's partition.
    .join('events as e', (j) => j.on('e.id', 'u.event_id').andOn('e.created_at', 'u.event_created_at'))
    .select('e.*')
    .where({ 'e.merchant_id': scope.merchantId, 'e.mode': scope.mode });
  if (opts.type !== undefined) query.andWhere('e.type', opts.type);
  return newestFirst<EventRow>(query, opts.after, opts.limit, order, ['u.event_created_at', 'u.event_id']);
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
    if (near) return near;
  }
  return (await query().first()) ?? null;
}

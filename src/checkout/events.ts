import type { Db } from '../db/knex';
import type { KeyMode } from '../keys/keys';
import { newId } from '../lib/ids';
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

/** How long the event log keeps events. */
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
  const query = db('events').where({ merchant_id: scope.merchantId, mode: scope.mode });

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
    .orderBy([
      { column: 'event_created_at', order },
      { column: 'event_id', order },
    ]);
  if (opts.since !== undefined) undelivered.andWhere('event_created_at', '>=', opts.since);
  const query = db
    .from(undelivered.as('u'))
    .join('events as e', 'e.id', 'u.event_id')
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
  return (await db('events').where({ id, merchant_id: scope.merchantId, mode: scope.mode }).first()) ?? null;
}

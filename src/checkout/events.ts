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

/** One page of the merchant's events in `mode`, newest first (or oldest first for `asc`). */
export async function listEvents(
  db: Db,
  scope: { merchantId: string; mode: KeyMode },
  opts: { type?: string; since?: Date; after?: Keyset; limit: number; order?: 'desc' | 'asc' },
) {
  const query = db('events').where({ merchant_id: scope.merchantId, mode: scope.mode });

  if (opts.type !== undefined) query.andWhere({ type: opts.type });
  if (opts.since !== undefined) query.andWhere('created_at', '>=', opts.since);
  return newestFirst<EventRow>(query, opts.after, opts.limit, opts.order);
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

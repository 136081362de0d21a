/** Show: an event's recorded attempts as `GET /v1/events/{id}` lists them (the read side of record). */
import { iso } from '../lib/time';
import type { Db } from '../db/knex';

/** An `event_deliveries` row: one attempt (or one cancelled attempt) of one event to one endpoint. */
export interface DeliveryRow {
  event_id: string;
  endpoint_id: string;
  generation: number;
  attempt_no: number;
  status_code: number | null;
  error: string | null;
  delivered_at: Date | null;
  next_retry_at: Date | null;
  duration_ms: number | null;
  response_body: string | null;
  created_at: Date;
}

/** A delivery as the event read shows it. */
export function deliveryOut(row: DeliveryRow) {
  return {
    endpoint_id: row.endpoint_id,
    attempt_no: row.attempt_no,
    status_code: row.status_code,
    error: row.error,
    delivered_at: iso(row.delivered_at),
    next_retry_at: iso(row.next_retry_at),
    duration_ms: row.duration_ms,
    response_body: row.response_body,
  };
}

/** The `deliveries` of `GET /events/{id}` (the caller has checked the event is the merchant's), in recorded order. */
export async function eventDeliveries(db: Db, eventId: string) {
  const rows: DeliveryRow[] = await db('event_deliveries')
    .where({ event_id: eventId })
    .orderBy(['created_at', 'endpoint_id', 'generation', 'attempt_no']);
  return rows.map(deliveryOut);
}

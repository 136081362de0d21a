/** The `webhook_endpoints` row, its API object, and which event types an endpoint subscribes to. */
import type { KeyMode } from '../keys/keys';

/** A `webhook_endpoints` row. */
export interface EndpointRow {
  id: string;
  merchant_id: string;
  mode: KeyMode;
  url: string;
  events: string[];
  status: 'enabled' | 'disabled';
  disabled_reason: string | null;
  description: string | null;
  secret_ciphertext: string;
  previous_secret_ciphertext: string | null;
  previous_secret_expires_at: Date | null;
  failing_since: Date | null;
  last_success_at: Date | null;
  /** The error token of the latest failed attempt of the current failure streak. */
  last_error: string | null;
  /** When the 24-hour failing e-mail went (one before `failing_since` was for an earlier streak). */
  failing_notified_at: Date | null;
  /** The create's Idempotency-Key and request hash: what a create run again converges on. */
  idempotency_key: string | null;
  request_hash: string | null;
  /** POSTs in flight to the endpoint at most. */
  max_in_flight: number;
  created_at: Date;
  updated_at: Date;
}

/**
 * Every column of `EndpointRow`, for statements that return the row by name: a prepared statement
 * that returns `*` fails ("cached plan must not change result type") on every pooled connection of
 * a release still serving once a later release's expand migration adds a column.
 */
export const endpointColumns = [
  'id',
  'merchant_id',
  'mode',
  'url',
  'events',
  'status',
  'disabled_reason',
  'description',
  'secret_ciphertext',
  'previous_secret_ciphertext',
  'previous_secret_expires_at',
  'failing_since',
  'last_success_at',
  'last_error',
  'failing_notified_at',
  'idempotency_key',
  'request_hash',
  'max_in_flight',
  'created_at',
  'updated_at',
] as const satisfies ReadonlyArray<keyof EndpointRow>;

/** The Webhook endpoint object (never the secret; create and rotate add it themselves). */
export function endpointOut(row: EndpointRow) {
  return {
    id: row.id,
    object: 'webhook_endpoint',
    url: row.url,
    events: row.events,
    mode: row.mode,
    status: row.status,
    disabled_reason: row.disabled_reason,
    description: row.description,
    created_at: new Date(row.created_at).toISOString(),
  };
}

/** True when an endpoint subscribed with `events` gets events of `type`. */
export function subscribes(events: readonly string[], type: string): boolean {
  return events.includes('*') || events.includes(type);
}

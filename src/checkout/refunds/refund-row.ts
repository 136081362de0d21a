import type { KeyMode } from '../../keys/keys';

/** A `refunds` row as knex returns it. */
export interface RefundRow {
  id: string;
  merchant_id: string;
  mode: KeyMode;
  session_id: string;
  attempt_id: string;
  amount: number;
  currency: string;
  reason: string;
  initiated_by: string;
  status: 'requested' | 'succeeded' | 'failed';
  gateway_reference: string | null;
  failure_reason: string | null;
  metadata: Record<string, string>;
  idempotency_key: string | null;
  /** Hash of the create's request: with the key, what a create run again finds its refund by. */
  request_hash: string | null;
  created_at: Date;
  updated_at: Date;
}

/** The Refund object. */
export function refundOut(row: RefundRow) {
  return {
    id: row.id,
    object: 'refund',
    livemode: row.mode === 'live',
    session_id: row.session_id,
    attempt_id: row.attempt_id,
    amount: row.amount,
    currency: row.currency,
    reason: row.reason,
    initiated_by: row.initiated_by,
    status: row.status,
    gateway_reference: row.gateway_reference,
    failure_reason: row.failure_reason,
    metadata: row.metadata,
    created_at: new Date(row.created_at).toISOString(),
    updated_at: new Date(row.updated_at).toISOString(),
  };
}

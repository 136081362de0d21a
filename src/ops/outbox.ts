import type { Db } from '../db/knex';
import { intInRange } from './checks';
import { iso } from '../lib/time';
import { OpsError } from './errors';

export interface OutboxMessageOut {
  id: number;
  kind: 'email' | 'sms';
  to: string;
  subject: string | null;
  body: string;
  created_at: string;
  /** When the relay handed it to a transport; null while pending, or when given up. */
  sent_at: string | null;
  attempts: number;
  last_error: string | null;
  /** When the relay tries next; null once sent or given up. */
  next_attempt_at: string | null;
}

/** Messages the development e-mail and SMS adapters recorded, newest first. */
export async function listOutbox(
  db: Db,
  input: { kind?: string; limit?: number } = {},
): Promise<{ messages: OutboxMessageOut[] }> {
  if (input.kind !== undefined && input.kind !== 'email' && input.kind !== 'sms') {
    throw new OpsError('invalid_kind', 'kind must be email or sms');
  }
  const limit = intInRange(input.limit ?? 20, 'limit', 1, 1000);
  const query = db('outbox').orderBy('id', 'desc').limit(limit);
  if (input.kind) query.where({ kind: input.kind });
  const rows = await query.select(
    'id',
    'kind',
    'to',
    'subject',
    'body',
    'created_at',
    'sent_at',
    'attempts',
    'last_error',
    'next_attempt_at',
  );
  return {
    messages: rows.map((r) => ({
      ...r,
      created_at: iso(r.created_at),
      sent_at: iso(r.sent_at),
      next_attempt_at: iso(r.next_attempt_at),
    })),
  };
}

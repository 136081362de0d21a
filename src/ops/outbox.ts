import type { Db } from '../db/knex';
import { intInRange, iso } from './checks';
import { OpsError } from './errors';

export interface OutboxMessageOut {
  id: number;
  kind: 'email' | 'sms';
  to: string;
  subject: string | null;
  body: string;
  created_at: string;
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
  const rows = await query.select('id', 'kind', 'to', 'subject', 'body', 'created_at');
  return { messages: rows.map((r) => ({ ...r, created_at: iso(r.created_at) })) };
}

import type { Db } from '../db/knex';
import { intInRange } from './checks';
import { iso } from '../lib/time';
import { OpsError } from './errors';
import { maskCodes } from '../messaging/mask';

export interface OutboxMessageOut {
  id: number;
  kind: 'email' | 'sms';
  to: string;
  subject: string | null;
  /** The code of a sent SMS is masked; null once the janitor purged it (SMS, 10 minutes after queueing). */
  body: string | null;
  created_at: string;
  /** When the relay handed it to a transport; null while pending, or when given up. */
  sent_at: string | null;
  attempts: number;
  last_error: string | null;
  /** When the relay tries next; null once sent or given up. */
  next_attempt_at: string | null;
  /** Written for a test-mode session: kept here, never sent. */
  test_mode: boolean;
}

/** Outbox messages, newest first; the code of a sent SMS is masked (the shopper has it). */
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
    'test_mode',
  );
  return {
    messages: rows.map((r) => ({
      ...r,
      body: r.kind === 'sms' && r.sent_at && r.body !== null ? maskCodes(r.body) : r.body,
      created_at: iso(r.created_at),
      sent_at: iso(r.sent_at),
      next_attempt_at: iso(r.next_attempt_at),
    })),
  };
}

import { Client as TemporalClient, Connection } from '@temporalio/client';
import { temporal } from '@temporalio/proto';
import { Client as PgClient } from 'pg';
import { randomString } from '../../src/lib/ids';
import { sessionBody } from '../upgrade/load';
import { NAMESPACE, type Stack } from './stack';

/**
 * Session deadlines across a fault: sessions whose `expires_at` falls every DEADLINE_EVERY_MS from
 * the baseline to well after the fault, each of which must expire once, at its `expires_at`. A
 * session's deadline is its workflow's timer (workflows/session.ts), so a deadline that falls
 * while the history node owning its shard is dead fires once the shard serves again: the scenario
 * states how late that may be.
 */

/** One session armed to expire at `expiresAt` (epoch ms, as the API recorded it). */
export interface ArmedDeadline {
  sessionId: string;
  merchant: number;
  expiresAt: number;
}

/** How each armed session ended: expired at `expiredAt` (its last update), or not (still open). */
export interface DeadlineOutcome extends ArmedDeadline {
  status: string;
  /** When it expired (`updated_at` of the expiring transition), or null when it did not. */
  expiredAt: number | null;
}

export const DEADLINE_EVERY_MS = 2000;

/**
 * Creates one session per deadline in `at` (epoch ms) and moves each one's `expires_at` there
 * with the test-mode fast-forward (`POST /v1/test_helpers/checkout/sessions/{id}/fast_forward`),
 * as a merchant's test integration would: the session workflow re-arms its timer for it.
 */
export async function armDeadlines(stack: Stack, at: number[]): Promise<ArmedDeadline[]> {
  const armed: ArmedDeadline[] = [];
  for (const [i, when] of at.entries()) {
    const m = stack.merchants[i % stack.merchants.length];
    const auth = { authorization: `Bearer ${m.secretKey}` };
    const created = await expect201or200(
      stack,
      'POST',
      '/v1/checkout/sessions',
      { ...auth, 'idempotency-key': `chaos_deadline_${randomString(20)}` },
      sessionBody(`deadline-${i}-${randomString(8)}`, false),
    );
    const left = Math.floor((Date.parse(created.expires_at) - when) / 1000);
    const moved = await expect201or200(
      stack,
      'POST',
      `/v1/test_helpers/checkout/sessions/${created.id}/fast_forward`,
      auth,
      { seconds: left },
    );
    armed.push({ sessionId: created.id, merchant: m.index, expiresAt: Date.parse(moved.expires_at) });
  }
  return armed;
}

/** Each armed session as it is now, read from the database. */
export async function readDeadlines(stack: Stack, armed: ArmedDeadline[]): Promise<DeadlineOutcome[]> {
  const client = new PgClient({ connectionString: stack.databaseUrl });
  await client.connect();
  try {
    const { rows } = await client.query<{ id: string; status: string; updated_at: Date }>(
      'SELECT id, status, updated_at FROM checkout_sessions WHERE id = ANY($1)',
      [armed.map((a) => a.sessionId)],
    );
    const byId = new Map(rows.map((r) => [r.id, r]));
    return armed.map((a) => {
      const row = byId.get(a.sessionId);
      const expired = row?.status === 'expired';
      return { ...a, status: row?.status ?? 'missing', expiredAt: expired ? row.updated_at.getTime() : null };
    });
  } finally {
    await client.end();
  }
}

/** A deadline's lateness in ms (Infinity when it never expired). */
export const lateness = (d: DeadlineOutcome) => (d.expiredAt === null ? Infinity : d.expiredAt - d.expiresAt);

/** Sends a request through the balancer, retried while the answer is a 5xx (the setup runs before the fault). */
async function expect201or200(
  stack: Stack,
  method: string,
  path: string,
  headers: Record<string, string>,
  body: unknown,
): Promise<{ id: string; expires_at: string }> {
  for (let tries = 0; ; tries++) {
    const res = await stack.balancer.request(method, path, headers, body);
    if (res.status === 200 || res.status === 201) return JSON.parse(res.text);
    if (tries >= 5 || (res.status !== null && res.status < 500))
      throw new Error(`${method} ${path}: ${res.status ?? res.connectionError} ${res.text}`);
    await new Promise((r) => setTimeout(r, 1000));
  }
}

/**
 * What a late session's workflow did around its deadline, for the report: each history event with
 * its time relative to the deadline (`+12.3 s TIMER_FIRED`), compact.
 */
export async function deadlineHistory(stack: Stack, d: DeadlineOutcome): Promise<string> {
  const connection = await Connection.connect({ address: stack.temporalAddress, connectTimeout: '5s' });
  try {
    const client = new TemporalClient({ connection, namespace: NAMESPACE });
    const history = await client.workflow.getHandle(d.sessionId).fetchHistory();
    const types = temporal.api.enums.v1.EventType;
    return (history.events ?? [])
      .map((e) => {
        const at = Number(e.eventTime?.seconds ?? 0) * 1000 + Math.floor((e.eventTime?.nanos ?? 0) / 1e6);
        const offset = (at - d.expiresAt) / 1000;
        const name = (types[e.eventType ?? 0] ?? String(e.eventType)).replace(/^EVENT_TYPE_/, '');
        return `${offset >= 0 ? '+' : ''}${offset.toFixed(1)} s ${name}`;
      })
      .filter((line) => !line.startsWith('-') || line.includes('TIMER_STARTED'))
      .join(', ');
  } catch (err) {
    return `history not read: ${err instanceof Error ? err.message : String(err)}`;
  } finally {
    await connection.close();
  }
}

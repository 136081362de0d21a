import { outboxGivenUp } from '../telemetry/durable';
import { fenced } from '../telemetry/fencing';
import type { ClientConfig } from 'pg';
import type { Knex } from 'knex';
import type { Db } from '../db/knex';
import { startNotifiedLoop } from '../db/notified-loop';
import { maskCodes } from './mask';
import { type Clock, systemClock } from '../lib/clock';
import { log as defaultLog, errorText } from '../lib/log';
import type { MessageKind, OutboxMessage, Transports } from './transports';
import { inStoredTrace } from '../telemetry/propagation';

/** Postgres announces every insert into `outbox` here when its transaction commits (a trigger). */
export const OUTBOX_CHANNEL = 'svc_outbox';

/** Wait after the 1st, 2nd, … failed attempt; the last entry is the last retry. */
export const RETRY_DELAYS_MS = [30_000, 2 * 60_000, 10 * 60_000, 60 * 60_000, 6 * 60 * 60_000] as const;
/** Attempts before a message is given up (the first try and one per retry delay). */
export const MAX_ATTEMPTS = RETRY_DELAYS_MS.length + 1;
/**
 * A message not sent this long after it was queued is given up: an SMS is an OTP code, dead after
 * 10 minutes; an e-mail older than a day is news the merchant has long had some other way. It also
 * keeps a backlog queued while no transport was configured from going out late all at once.
 */
export const MAX_AGE_MS: Record<MessageKind, number> = { sms: 10 * 60_000, email: 24 * 60 * 60_000 };

const LAST_ERROR_MAX_CHARS = 500;

export type RelayLog = Pick<typeof defaultLog, 'info' | 'warn' | 'error'>;

export interface OutboxRelayDeps {
  db: Db;
  /** A kind without a transport is never claimed: its rows stay in the outbox for `ops outbox list`. */
  transports: Transports;
  log?: RelayLog;
  /** Decides what is due and stamps `sent_at` / `next_attempt_at` (tests move it). */
  now?: Clock;
  /** How often due messages are looked for without a notification (retries, a missed one). */
  pollEveryMs?: number;
  /** Messages claimed per transaction (and sent concurrently). */
  batchSize?: number;
  /** Only messages to these addresses (test files share one database). */
  onlyTo?: ReadonlySet<string>;
  /** Runs between a message's claim and its send (tests freeze a sender here, as a paused process would be). */
  beforeSend?: (message: OutboxMessage) => Promise<void>;
}

export interface OutboxRelay {
  /** Resolves once the relay LISTENs for new messages (at once when it has no transport). */
  readonly ready: Promise<void>;
  /** Sends every message due now; resolves when none is left. */
  drain(): Promise<void>;
  stop(): Promise<void>;
}

interface ClaimedRow extends OutboxMessage {
  /** Including the one just claimed. */
  attempts: number;
  created_at: Date;
  /** The trace that queued the message (an OTP request): the send continues it. */
  traceparent: string | null;
  /** Where the claim moved `next_attempt_at` (the lease's end): with `attempts`, the claim's fencing token. */
  lease_end: Date;
}

/**
 * The outbox relay, run by the worker process. It LISTENs on `svc_outbox` and polls every couple
 * of seconds; each pass claims a small batch of due, unsent messages of the kinds it has a
 * transport for (FOR UPDATE SKIP LOCKED, so several workers share the work) and, in the same
 * transaction, counts the attempt and leases the rows by moving `next_attempt_at` to when a retry
 * would be due. It sends them after commit and records `sent_at`, or the error and the retry time
 * (RETRY_DELAYS_MS), giving up after MAX_ATTEMPTS or MAX_AGE_MS. A relay dying mid-send leaves
 * the row to be retried when its lease ends: delivery is at least once. A sent SMS keeps its body
 * with the code masked; a test-mode message is never claimed. Logs carry ids and errors, never
 * addresses or bodies (an SMS body is an OTP code).
 */
export function startOutboxRelay(deps: OutboxRelayDeps): OutboxRelay {
  const log = deps.log ?? defaultLog;
  const now = deps.now ?? systemClock;
  const pollEveryMs = deps.pollEveryMs ?? 2000;
  const batchSize = deps.batchSize ?? 10;
  const kinds = (Object.keys(deps.transports) as MessageKind[]).filter((k) => deps.transports[k]);

  /** Unsent, still scheduled rows of our kinds (and addresses); a test-mode message never is. */
  function scheduled(query: Knex.QueryBuilder): Knex.QueryBuilder {
    query.whereIn('kind', kinds).whereNull('sent_at').whereNotNull('next_attempt_at').where({ test_mode: false });
    if (deps.onlyTo) query.whereIn('to', [...deps.onlyTo]);
    return query;
  }

  /** Whether a row queued at `createdAt` is past its kind's MAX_AGE_MS at `at`. */
  const expired = (kind: MessageKind, createdAt: Date, at: Date) =>
    at.getTime() - createdAt.getTime() >= MAX_AGE_MS[kind];

  /** Gives up the due rows that are too old or out of attempts (a relay that died on the last one). */
  async function giveUpStale(at: Date): Promise<void> {
    const stale = scheduled(deps.db('outbox'))
      .where('next_attempt_at', '<=', at)
      .where((q) => {
        q.where('attempts', '>=', MAX_ATTEMPTS);
        for (const kind of kinds)
          q.orWhere((k) => k.where({ kind }).where('created_at', '<=', new Date(at.getTime() - MAX_AGE_MS[kind])));
      })
      .limit(1000)
      .forUpdate()
      .skipLocked()
      .select('id');
    const rows: Array<{ id: number; kind: 'sms' | 'email' }> = await deps
      .db('outbox')
      .whereIn('id', stale)
      .update({
        next_attempt_at: null,
        last_error: deps.db.raw('coalesce(last_error, ?)', ['not sent before it expired']),
      })
      .returning(['id', 'kind']);
    for (const row of rows) outboxGivenUp.inc({ kind: row.kind });
    if (rows.length > 0) log.warn('outbox messages given up unsent', { ids: rows.map((r) => r.id) });
  }

  /** Claims one batch in one transaction: counts the attempt and leases each row until its retry time. */
  async function claim(at: Date): Promise<ClaimedRow[]> {
    return deps.db.transaction(async (trx) => {
      const query = scheduled(trx('outbox'))
        .where('next_attempt_at', '<=', at)
        .where('attempts', '<', MAX_ATTEMPTS)
        .where((q) => {
          for (const kind of kinds)
            q.orWhere((k) => k.where({ kind }).where('created_at', '>', new Date(at.getTime() - MAX_AGE_MS[kind])));
        })
        .orderBy('next_attempt_at')
        .orderBy('id')
        .limit(batchSize)
        .forUpdate()
        .skipLocked()
        .select('id', 'kind', 'to', 'subject', 'body', 'attempts', 'created_at', 'traceparent');
      const rows: ClaimedRow[] = await query;
      for (const row of rows) {
        row.attempts += 1;
        row.lease_end = new Date(at.getTime() + retryDelayMs(row.attempts));
        await trx('outbox').where({ id: row.id }).update({ attempts: row.attempts, next_attempt_at: row.lease_end });
      }
      return rows;
    });
  }

  /**
   * The row as this claim left it: same attempt, same lease end, unsent. A later claim (this
   * relay's lease lapsed and another took the row, or gave it up) changes one of them, so a write
   * through this takes effect only while the claim is still the writer's own.
   */
  const ownRow = (row: ClaimedRow) =>
    deps
      .db('outbox')
      .where({ id: row.id, attempts: row.attempts, next_attempt_at: row.lease_end })
      .whereNull('sent_at');

  /** Counts and logs a write of `row` that its claim no longer covered. */
  const fencedWrite = (row: ClaimedRow, write: string) =>
    fenced('outbox', 1, { write, id: row.id, kind: row.kind, attempts: row.attempts });

  /** Sends one message in the trace that queued it. */
  function sendOne(row: ClaimedRow): Promise<void> {
    const attributes = { 'outbox.kind': row.kind, 'outbox.attempts': row.attempts };
    return inStoredTrace(row.traceparent, 'outbox send', attributes, () => sendTraced(row));
  }

  async function sendTraced(row: ClaimedRow): Promise<void> {
    const transport = deps.transports[row.kind]!;
    const { attempts, created_at: createdAt, traceparent: _, lease_end: leaseEnd, ...message } = row;
    await deps.beforeSend?.(message);
    // Claimed before sending, and checked again right before: a sender resumed after its lease
    // ended (by its own clock) or after another relay took the row sends nothing.
    if (now() >= leaseEnd || !(await ownRow(row).first('id'))) {
      fencedWrite(row, 'send');
      return;
    }
    try {
      await transport.send(message);
    } catch (err) {
      const lastError = errorText(err).slice(0, LAST_ERROR_MAX_CHARS);
      const at = now();
      const retryAt = new Date(at.getTime() + retryDelayMs(attempts));
      const giveUp = attempts >= MAX_ATTEMPTS || expired(row.kind, createdAt, retryAt);
      const updated = await ownRow(row).update({ last_error: lastError, next_attempt_at: giveUp ? null : retryAt });
      if (updated === 0) return fencedWrite(row, 'failure mark');
      if (giveUp) outboxGivenUp.inc({ kind: row.kind });
      if (giveUp) log.warn('outbox message given up', { id: row.id, kind: row.kind, attempts, error: err });
      else
        log.warn('outbox message not sent; will retry', {
          id: row.id,
          kind: row.kind,
          attempts,
          error: err,
          retry_at: retryAt.toISOString(),
        });
      return;
    }
    // A sent SMS is an OTP code delivered: the outbox keeps no readable copy of it.
    const marked = await ownRow(row).update({
      sent_at: now(),
      next_attempt_at: null,
      ...(row.kind === 'sms' ? { body: maskCodes(row.body) } : {}),
    });
    if (marked === 0) return fencedWrite(row, 'sent mark');
    log.info('outbox message sent', { id: row.id, kind: row.kind, attempts });
  }

  /** One batch: claim, send concurrently, record; returns how many it claimed. */
  async function batch(): Promise<number> {
    const rows = await claim(now());
    await Promise.all(rows.map((row) => sendOne(row)));
    return rows.length;
  }

  return startNotifiedLoop({
    connection: deps.db.client.config.connection as string | ClientConfig,
    channel: OUTBOX_CHANNEL,
    name: 'outbox relay',
    everyMs: pollEveryMs,
    batchSize,
    batch,
    beforePass: () => giveUpStale(now()),
    enabled: kinds.length > 0,
  });
}

/** The wait after the `attempts`-th failed attempt (the last delay repeats as the lease of a final one). */
export function retryDelayMs(attempts: number): number {
  return RETRY_DELAYS_MS[Math.min(attempts, RETRY_DELAYS_MS.length) - 1];
}

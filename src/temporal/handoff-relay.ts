import { type Span, SpanStatusCode } from '@opentelemetry/api';
import { temporalErrorCause } from './grpc-error';
import { handoffRelayFailures } from '../telemetry/durable';
import { fenced } from '../telemetry/fencing';
import type { Db } from '../db/knex';
import { type NotifiedLoop, startNotifiedLoop } from '../db/notified-loop';
import { systemClock } from '../lib/clock';
import { errorText, log } from '../lib/log';
import { inStoredTrace } from '../telemetry/propagation';
import { deliverHandoff, type Handoff, type HandoffTarget } from './handoffs';

/** The lease (and the wait before a retry) after the n-th claim: 5 s, 10 s, 20 s, 40 s, then every minute. */
export const RELAY_RETRY = { firstSeconds: 5, maxSeconds: 60 } as const;

const LAST_ERROR_MAX_CHARS = 500;

export interface HandoffRelayDeps extends Omit<HandoffTarget, 'clock'> {
  db: Db;
  clock?: HandoffTarget['clock'];
  /** How often due handoffs are looked for. */
  pollEveryMs?: number;
  /** Handoffs claimed per statement (and delivered concurrently, one per workflow). */
  batchSize?: number;
  /** Only these merchants' handoffs (test files share one database, each with its own Temporal server). */
  merchantIds?: ReadonlySet<string>;
  /** Runs between a delivery and its delete (tests freeze a relay here, as a paused process would be). */
  afterDeliver?: (handoffId: number) => Promise<void>;
}

/** `drain()` delivers every due handoff now; `stop()` waits for the running pass. */
export type HandoffRelay = NotifiedLoop;

interface ClaimedRow {
  id: number;
  workflow_id: string;
  payload: Handoff;
  attempts: number;
  /** The trace of the request or activity that recorded the handoff. */
  traceparent: string | null;
}

/**
 * The handoff relay, run by the worker process: every second it claims the due rows of
 * `workflow_handoffs` (ones the API did not deliver within its lease: it died after the commit,
 * or Temporal refused), in one statement that takes only the oldest undelivered row of each
 * workflow (FOR UPDATE SKIP LOCKED, so several workers share the work) and leases them until their
 * retry time. It delivers them after that statement and deletes each one delivered, or records the
 * error; the lease ending is the retry. Never given up: a handoff is what keeps a committed attempt
 * or refund from being stranded, so one that keeps failing is logged on every try.
 */
export function startHandoffRelay(deps: HandoffRelayDeps): HandoffRelay {
  const target: HandoffTarget = {
    temporal: deps.temporal,
    taskQueue: deps.taskQueue,
    clock: deps.clock ?? systemClock,
    callTimeoutMs: deps.callTimeoutMs,
  };
  const batchSize = deps.batchSize ?? 50;

  async function claim(): Promise<ClaimedRow[]> {
    const merchants = deps.merchantIds ? [...deps.merchantIds] : null;
    if (merchants?.length === 0) return [];
    const { rows } = await deps.db.raw(
      `UPDATE workflow_handoffs
          SET attempts = attempts + 1,
              next_attempt_at = now() + make_interval(secs => least(?, ? * power(2, attempts)))
        WHERE id IN (
          SELECT h.id FROM workflow_handoffs h
           WHERE h.next_attempt_at <= now()
             ${merchants ? 'AND h.merchant_id = ANY(?::text[])' : ''}
             AND NOT EXISTS (SELECT 1 FROM workflow_handoffs e WHERE e.workflow_id = h.workflow_id AND e.id < h.id)
           ORDER BY h.next_attempt_at, h.id
           LIMIT ?
           FOR UPDATE SKIP LOCKED)
        RETURNING id, workflow_id, payload, attempts, traceparent`,
      [RELAY_RETRY.maxSeconds, RELAY_RETRY.firstSeconds, ...(merchants ? [merchants] : []), batchSize],
    );
    return rows;
  }

  /**
   * The row as this claim left it: every claim counts an attempt, so `attempts` is the claim's
   * fencing token; once another relay has claimed the row (this one's lease ended), nothing this
   * one writes takes effect. A lease that ended with no one taking the row over still counts as
   * this relay's: the first lease (5 s) is as long as the Temporal call's deadline, so a slow
   * delivery that succeeded is deleted rather than delivered again (docs/decisions.md).
   */
  const ownRow = (row: ClaimedRow) => deps.db('workflow_handoffs').where({ id: row.id, attempts: row.attempts });

  /** Counts and logs a write of `row` that its claim no longer covered (ids only, never the payload). */
  const fencedWrite = (row: ClaimedRow, write: string) =>
    fenced('handoff_relay', 1, {
      write,
      handoff_id: row.id,
      kind: row.payload.kind,
      workflow_id: row.workflow_id,
      attempts: row.attempts,
    });

  /** Delivers one row in the trace that recorded it (the start or signal span is a child of its writer). */
  async function deliverOne(row: ClaimedRow): Promise<void> {
    const attributes = { 'handoff.kind': row.payload.kind, 'handoff.attempts': row.attempts };
    await inStoredTrace(row.traceparent, 'handoff relay', attributes, (span) => relayOne(row, span));
  }

  async function relayOne(row: ClaimedRow, span: Span): Promise<void> {
    try {
      await deliverHandoff(target, row.payload);
    } catch (err) {
      span.setStatus({ code: SpanStatusCode.ERROR, message: errorText(err) });
      const lastError = errorText(err).slice(0, LAST_ERROR_MAX_CHARS);
      const marked = await ownRow(row).update({ last_error: lastError });
      if (marked === 0) fencedWrite(row, 'error mark');
      handoffRelayFailures.inc({ reason: temporalErrorCause(err).grpc_status });
      log.warn('handoff not delivered; will retry', {
        handoff_id: row.id,
        kind: row.payload.kind,
        workflow_id: row.workflow_id,
        attempts: row.attempts,
        error: err,
      });
      return;
    }
    await deps.afterDeliver?.(row.id);
    // Delivered (again, if another relay took the row over: handoffs are idempotent), but deleted
    // only while the claim is this relay's: a row taken over is delivered and deleted by its new
    // holder, and the workflow's next handoff is not claimed before it is.
    if ((await ownRow(row).del()) === 0) return fencedWrite(row, 'delete');
    log.info('handoff delivered by the relay', {
      handoff_id: row.id,
      kind: row.payload.kind,
      workflow_id: row.workflow_id,
      attempts: row.attempts,
    });
  }

  return startNotifiedLoop({
    name: 'handoff relay',
    everyMs: deps.pollEveryMs ?? 1000,
    batchSize,
    batch: async () => {
      const rows = await claim();
      await Promise.all(rows.map(deliverOne));
      return rows.length;
    },
  });
}

import type { Client } from '@temporalio/client';
import type { Knex } from 'knex';
import type { Db } from '../db/knex';
import type { KeyMode } from '../keys/keys';
import type { Clock } from '../lib/clock';
import { log } from '../lib/log';
import { currentTraceparent } from '../telemetry/propagation';
import { type WakeTarget, wakeEndpoint } from './delivery';
import { RefundStart, startRefundWorkflow } from './refund';
import {
  AttemptStart,
  FastForward,
  SessionStart,
  signalAttemptResolved,
  signalAttemptStarted,
  deliverDecision,
  signalFastForwarded,
  TestGatewayDecision,
  signalSessionSettled,
  startSessionWorkflow,
} from './session';

/**
 * What a workflow must hear of a committed state change. Each is delivered at least once, and
 * each is harmless repeated: a workflow start reuses the running one (a refund's is never run
 * twice), the session workflow adopts an attempt id once, and a signal to a workflow that has
 * ended is dropped (it has nothing left to stop).
 */
export type Handoff =
  /** A new session's workflow and its timer for `expires_at`. */
  | { kind: 'session_start'; session: SessionStart }
  /** An attempt sent to the vendor, for the session workflow to run (starting it if it is gone). */
  | { kind: 'attempt_started'; session: SessionStart; attempt: AttemptStart }
  /**
   * A button pressed on the test gateway's page. Delivered from this release on; written from the next
   * (the previous release's relay would drop a kind it does not know).
   */
  | { kind: 'attempt_decided'; sessionId: string; attemptId: string; decision: TestGatewayDecision }
  /** An attempt settled outside the workflow (its initiation failed). */
  | { kind: 'attempt_resolved'; sessionId: string; attemptId: string; status: string }
  /** A session settled outside its workflow (`/expire`, a shopper cancel, a new price, cash on delivery). */
  | { kind: 'session_settled'; sessionId: string; status: string; by: string }
  /** A refund to settle at the vendor. */
  | { kind: 'refund_start'; refund: RefundStart }
  /** Test mode's fast-forward moved a session's deadlines. */
  | { kind: 'session_fast_forwarded'; sessionId: string; moved: FastForward }
  /** An endpoint's queue or failure clock changed outside its workflow (fast-forward): look again. */
  | { kind: 'endpoint_wake'; endpoint: WakeTarget };

/** A handoff written in a transaction, for the caller to deliver after the commit. */
export interface PendingHandoff {
  id: number;
  handoff: Handoff;
}

/** Who the handoff belongs to (the relay in a test stack takes only its own merchants'). */
export interface HandoffScope {
  merchantId: string;
  mode: KeyMode;
}

/** How long the API has to deliver its own handoff before the relay may take it over. */
export const FAST_PATH_LEASE_SECONDS = 2;

function workflowIdOf(h: Handoff): string {
  if (h.kind === 'refund_start') return h.refund.refundId;
  if (h.kind === 'endpoint_wake') return h.endpoint.id;
  return 'session' in h ? h.session.sessionId : h.sessionId;
}

function columns(scope: HandoffScope, handoff: Handoff) {
  return {
    merchant_id: scope.merchantId,
    mode: scope.mode,
    workflow_id: workflowIdOf(handoff),
    kind: handoff.kind,
    payload: JSON.stringify(handoff),
    traceparent: currentTraceparent(),
  };
}

/** Records `handoff` in the caller's transaction; deliver it with `handOff` after the commit. */
export async function recordHandoff(trx: Db, scope: HandoffScope, handoff: Handoff): Promise<PendingHandoff> {
  const [{ id }]: Array<{ id: number }> = await trx('workflow_handoffs')
    .insert({
      ...columns(scope, handoff),
      next_attempt_at: trx.raw('now() + make_interval(secs => ?)', [FAST_PATH_LEASE_SECONDS]),
    })
    .returning('id');
  return { id, handoff };
}

/**
 * Runs `insert` (an INSERT … RETURNING * that may write nothing, e.g. ON CONFLICT DO NOTHING) and
 * records `handoff` in the same statement, only when it wrote a row: one round trip, one commit.
 */
export async function insertWithHandoff<T>(
  db: Db,
  insert: Knex.QueryBuilder,
  scope: HandoffScope,
  handoff: Handoff,
): Promise<{ row: T; pending: PendingHandoff } | undefined> {
  const statement = insert.toSQL();
  const c = columns(scope, handoff);
  const { rows } = await db.raw(
    `WITH w AS (${statement.sql}),
          h AS (INSERT INTO workflow_handoffs (merchant_id, mode, workflow_id, kind, payload, traceparent, next_attempt_at)
                SELECT ?::text, ?::text, ?::text, ?::text, ?::jsonb, ?::text, now() + make_interval(secs => ?) FROM w
                RETURNING id)
     SELECT w.*, h.id AS handoff_id FROM w, h`,
    [
      ...statement.bindings,
      c.merchant_id,
      c.mode,
      c.workflow_id,
      c.kind,
      c.payload,
      c.traceparent,
      FAST_PATH_LEASE_SECONDS,
    ],
  );
  if (rows.length === 0) return undefined;
  const { handoff_id: id, ...row } = rows[0];
  return { row: row as T, pending: { id: Number(id), handoff } };
}

/** Where handoffs go. */
export interface HandoffTarget {
  temporal: Client;
  taskQueue: string;
  clock: Clock;
  /**
   * Deadline of one delivery (the worker's relay: TEMPORAL_CALL_TIMEOUT_MS, its connection having no
   * default of its own); unset: the connection's (the API's has one on every call).
   */
  callTimeoutMs?: number;
}

/** Delivers one handoff (idempotent; throws when Temporal did not take it within its deadline). */
export async function deliverHandoff(target: HandoffTarget, h: Handoff): Promise<void> {
  if (target.callTimeoutMs === undefined) return deliverNow(target, h);
  const deadline = Date.now() + target.callTimeoutMs;
  await target.temporal.connection.withDeadline(deadline, () => deliverNow(target, h));
}

async function deliverNow(target: HandoffTarget, h: Handoff): Promise<void> {
  const { temporal, taskQueue } = target;
  switch (h.kind) {
    case 'session_start':
      return startSessionWorkflow(temporal, taskQueue, h.session);
    case 'attempt_started':
      return signalAttemptStarted(temporal, taskQueue, { session: h.session, attempt: h.attempt });
    case 'attempt_decided':
      return deliverDecision(temporal, h.sessionId, h.attemptId, h.decision);
    case 'attempt_resolved':
      return signalAttemptResolved(temporal, h.sessionId, h.attemptId, h.status);
    case 'session_settled':
      return signalSessionSettled(temporal, h.sessionId, h.status, h.by);
    case 'refund_start':
      return startRefundWorkflow(temporal, taskQueue, h.refund);
    case 'session_fast_forwarded':
      return signalFastForwarded(temporal, h.sessionId, h.moved);
    case 'endpoint_wake':
      return wakeEndpoint(temporal, taskQueue, h.endpoint);
    default:
      // Written by a newer release: it stays, retried with backoff, until a relay that knows it takes it.
      throw new Error(`handoff kind ${(h as { kind: string }).kind} is not known to this release`);
  }
}

export interface HandoffDeps extends HandoffTarget {
  db: Db;
  /**
   * Fault injection for tests: runs after the state change committed and before its handoff is
   * delivered; a throw is the process dying there. Never set in production.
   */
  beforeHandoff?: () => void | Promise<void>;
}

/** Delivered handoffs waiting to be deleted, per pool, and the deletion running for them. */
const delivered = new WeakMap<Db, { ids: number[]; running: Promise<void> | undefined }>();

/**
 * Deletes delivered handoffs in the background, every id gathered meanwhile in one statement, so
 * that no request waits for it. Harmless if it never happens (the process dies first): the relay
 * delivers the row again after its lease, and every handoff is harmless repeated.
 */
function forgetDelivered(db: Db, ids: number[]): void {
  const queue = delivered.get(db) ?? { ids: [], running: undefined };
  delivered.set(db, queue);
  queue.ids.push(...ids);
  queue.running ??= (async () => {
    while (queue.ids.length > 0) {
      const batch = queue.ids.splice(0, 1000);
      await db('workflow_handoffs')
        .whereIn('id', batch)
        .del()
        .catch((err: unknown) =>
          log.warn('could not delete delivered handoffs; the relay delivers them again (harmless)', {
            count: batch.length,
            error: err,
          }),
        );
    }
  })().finally(() => (queue.running = undefined));
}

/** Resolves once the delivered handoffs of `db` handed to the background so far are deleted. */
export async function handoffsForgotten(db: Db): Promise<void> {
  while (delivered.get(db)?.running) await delivered.get(db)!.running;
}

/**
 * The fast path, right after the commit: delivers the handoffs in order and has the ones
 * delivered deleted in the background. One Temporal refused is logged and left to the relay (its
 * lease ends within FAST_PATH_LEASE_SECONDS), so the caller's answer does not depend on Temporal being up.
 */
export async function handOff(deps: HandoffDeps, pending: PendingHandoff[]): Promise<void> {
  if (pending.length === 0) return;
  await deps.beforeHandoff?.();
  const done: number[] = [];
  for (const { id, handoff } of pending) {
    try {
      await deliverHandoff(deps, handoff);
      done.push(id);
    } catch (err) {
      log.warn('handoff not delivered; the relay retries it', {
        handoff_id: id,
        kind: handoff.kind,
        workflow_id: workflowIdOf(handoff),
        error: err,
      });
    }
  }
  if (done.length > 0) forgetDelivered(deps.db, done);
}

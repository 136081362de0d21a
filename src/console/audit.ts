import type { Context } from 'koa';
import type { Db } from '../db/knex';
import { log } from '../lib/log';
import { storableText } from '../lib/text';
import { consoleActions } from '../telemetry/console';
import type { ConsoleUser } from './accounts';

export type AuditOutcome = 'success' | 'denied' | 'failed';

/**
 * One line of the append-only audit log (who, what, to what, when, from where, the outcome) and
 * the matching counter. `detail` holds only what is not secret (scopes, a carrier, a reason).
 */
export async function audit(
  db: Db,
  ctx: Context,
  entry: {
    user?: ConsoleUser | null;
    email?: string | null;
    tenant?: { seller_id: string | null; merchant_id: string | null } | null;
    action: string;
    target?: string | null;
    outcome: AuditOutcome;
    detail?: Record<string, unknown>;
    at: Date;
  },
): Promise<void> {
  const tenant = entry.tenant ?? entry.user ?? null;
  await db('console_audit_log').insert({
    at: entry.at,
    user_id: entry.user?.id ?? null,
    actor_email: (entry.email ?? entry.user?.email ?? null)?.slice(0, 320) ?? null,
    seller_id: tenant?.seller_id ?? null,
    merchant_id: tenant?.merchant_id ?? null,
    action: entry.action,
    // A target can come from a URL or a form (refusals): text Postgres can hold, bounded.
    target: entry.target == null ? null : storableText(entry.target).slice(0, 200),
    outcome: entry.outcome,
    ip: ctx.ip,
    user_agent: ctx.get('user-agent').slice(0, 400),
    request_id: ctx.state.requestId,
    detail: entry.detail ? JSON.stringify(entry.detail) : null,
  });
  consoleActions.inc({ action: entry.action, outcome: entry.outcome });
  log.info('console action', { action: entry.action, outcome: entry.outcome, target: entry.target ?? undefined });
}

/** The tenant's audit log, newest first (owners read it). */
export async function auditPage(db: Db, tenant: { seller_id: string | null; merchant_id: string | null }, limit = 100) {
  const q = db('console_audit_log').orderBy('id', 'desc').limit(limit);
  if (tenant.seller_id) q.where({ seller_id: tenant.seller_id });
  else q.where({ merchant_id: tenant.merchant_id });
  return q.select('at', 'actor_email', 'action', 'target', 'outcome', 'ip', 'request_id');
}

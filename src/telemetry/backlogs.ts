import { Gauge } from 'prom-client';
import type { Db } from '../db/knex';
import { log } from '../lib/log';
import { registry } from './metrics';

/** Counts stop here: a backlog this deep is an incident whatever its exact size, and counting on would walk it. */
export const BACKLOG_COUNT_CAP = 100_000;

/** How long the backlog statement may run at scrape time before Postgres cancels it. */
const STATEMENT_TIMEOUT_MS = 1000;

/** The durable queues' backlogs, as the gauges and `ops status` show them. Ages in seconds, 0 when nothing waits. */
export interface Backlogs {
  webhook_deliveries_pending: number;
  webhook_oldest_due_delivery_age_seconds: number;
  handoffs_pending: number;
  handoff_oldest_age_seconds: number;
  outbox: Record<'sms' | 'email', { pending: number; oldest_pending_age_seconds: number }>;
}

const unsentOutbox = (kind: 'sms' | 'email') =>
  `FROM outbox WHERE kind = '${kind}' AND sent_at IS NULL AND next_attempt_at IS NOT NULL`;

/**
 * One statement, each part served by an index (EXPLAIN in test/integration/telemetry-backlogs.test.ts):
 * counts walk only the pending entries of a partial index, up to BACKLOG_COUNT_CAP; ages read the
 * first entry of one (webhook_queue_pending_due; outbox_unsent; the handoffs' primary key). A claimed row's next_attempt_at is its lease's
 * end, so a delivery being sent is not due.
 */
export const BACKLOG_STATEMENT = `SELECT
  (SELECT count(*) FROM (SELECT 1 FROM webhook_queue LIMIT ${BACKLOG_COUNT_CAP}) w) AS webhook_pending,
  (SELECT extract(epoch FROM now() - next_attempt_at) FROM webhook_queue
    WHERE next_attempt_at <= now() ORDER BY next_attempt_at LIMIT 1) AS webhook_oldest,
  (SELECT count(*) FROM (SELECT 1 FROM workflow_handoffs LIMIT ${BACKLOG_COUNT_CAP}) h) AS handoffs_pending,
  (SELECT extract(epoch FROM now() - created_at) FROM workflow_handoffs ORDER BY id LIMIT 1) AS handoff_oldest,
  (SELECT count(*) FROM (SELECT 1 ${unsentOutbox('sms')} LIMIT ${BACKLOG_COUNT_CAP}) s) AS sms_pending,
  (SELECT extract(epoch FROM now() - created_at) ${unsentOutbox('sms')} ORDER BY id LIMIT 1) AS sms_oldest,
  (SELECT count(*) FROM (SELECT 1 ${unsentOutbox('email')} LIMIT ${BACKLOG_COUNT_CAP}) e) AS email_pending,
  (SELECT extract(epoch FROM now() - created_at) ${unsentOutbox('email')} ORDER BY id LIMIT 1) AS email_oldest`;

type Row = Record<
  | 'webhook_pending'
  | 'webhook_oldest'
  | 'handoffs_pending'
  | 'handoff_oldest'
  | 'sms_pending'
  | 'sms_oldest'
  | 'email_pending'
  | 'email_oldest',
  string | number | null
>;

/** Reads the backlogs in one short statement (cancelled by Postgres after STATEMENT_TIMEOUT_MS). */
export async function readBacklogs(db: Db): Promise<Backlogs> {
  const row: Row = await db.transaction(async (trx) => {
    await trx.raw(`SET LOCAL statement_timeout = ${STATEMENT_TIMEOUT_MS}`);
    const { rows } = await trx.raw(BACKLOG_STATEMENT);
    return rows[0];
  });
  const n = (v: string | number | null) => Math.max(0, Number(v ?? 0));
  return {
    webhook_deliveries_pending: n(row.webhook_pending),
    webhook_oldest_due_delivery_age_seconds: n(row.webhook_oldest),
    handoffs_pending: n(row.handoffs_pending),
    handoff_oldest_age_seconds: n(row.handoff_oldest),
    outbox: {
      sms: { pending: n(row.sms_pending), oldest_pending_age_seconds: n(row.sms_oldest) },
      email: { pending: n(row.email_pending), oldest_pending_age_seconds: n(row.email_oldest) },
    },
  };
}

/**
 * The backlog gauges, read from Postgres at scrape time (one statement for all of them per scrape).
 * Registered by the worker only: every process sees the same rows, so one exporter is enough. The
 * outbox series are there for `outboxKinds`, the kinds this worker has a transport for (the rest
 * stay in the outbox by design, for `ops outbox list`, and would only look stuck).
 */
export function registerBacklogGauges(db: Db, outboxKinds: ReadonlyArray<'sms' | 'email'>): void {
  // Every gauge's collect() asks for the figures; one scrape shares one read.
  let current: Promise<Backlogs | undefined> | undefined;
  const read = () => {
    current ??= readBacklogs(db)
      .catch((err) => {
        log.warn('backlog gauges not read', { error: err instanceof Error ? err.message : String(err) });
        return undefined;
      })
      .finally(() => setTimeout(() => (current = undefined), 100).unref());
    return current;
  };
  const gauge = (name: string, help: string, set: (g: Gauge<'kind'>, b: Backlogs) => void, labelNames: 'kind'[] = []) =>
    new Gauge({
      name,
      help,
      labelNames,
      registers: [registry],
      async collect() {
        const backlogs = await read();
        if (backlogs) set(this, backlogs);
        else this.reset(); // no figure rather than a stale one
      },
    });
  gauge(
    'svc_webhook_deliveries_pending',
    `Webhook deliveries queued and not yet delivered, failed for good or cancelled (counted up to ${BACKLOG_COUNT_CAP}).`,
    (g, b) => g.set(b.webhook_deliveries_pending),
  );
  gauge(
    'svc_webhook_oldest_due_delivery_age_seconds',
    'How long the pending webhook delivery due first (next attempt time passed, not being sent) has been due; 0 when none is.',
    (g, b) => g.set(b.webhook_oldest_due_delivery_age_seconds),
  );
  gauge(
    'svc_handoff_oldest_age_seconds',
    'Age of the oldest workflow handoff not yet delivered to Temporal; 0 when none.',
    (g, b) => g.set(b.handoff_oldest_age_seconds),
  );
  gauge(
    'svc_outbox_pending',
    `Outbox messages waiting to be sent, by kind (counted up to ${BACKLOG_COUNT_CAP}).`,
    (g, b) => {
      for (const kind of outboxKinds) g.set({ kind }, b.outbox[kind].pending);
    },
    ['kind'],
  );
  gauge(
    'svc_outbox_oldest_pending_age_seconds',
    'Age of the oldest outbox message waiting to be sent, by kind; 0 when none.',
    (g, b) => {
      for (const kind of outboxKinds) g.set({ kind }, b.outbox[kind].oldest_pending_age_seconds);
    },
    ['kind'],
  );
}

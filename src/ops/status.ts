import type { Client } from '@temporalio/client';
import type { Db } from '../db/knex';
import { readBacklogs, type Backlogs } from '../telemetry/backlogs';
import { faultOf } from '../telemetry/faults';
import { withDeadline } from '../telemetry/metrics';
import { probePostgres, probeTemporal, type ProbeResult } from '../telemetry/readiness';
import { missingSearchAttributes } from '../temporal/search-attribute-setup';

/** One dependency as `ops status` itself found it, within the same deadline the service's probes have. */
export interface DependencyView {
  dependency: 'postgres' | 'temporal';
  ok: boolean;
  ms: number;
  deadline: string;
  detail: string | null;
}

/** One process as it sees its dependencies: its /readyz and the probe gauges of its /metrics. */
export interface ProcessView {
  url: string;
  role: string | null;
  /** ready | degraded | not_ready, or unreachable when its metrics port did not answer in time. */
  status: string;
  postgres: 'up' | 'down' | null;
  temporal: 'up' | 'down' | null;
  clock_skew_seconds: number | null;
  /** The failing checks of its /readyz (`postgres: no answer within 6000 ms (DB_QUERY_TIMEOUT_MS)`), or why it was not read. */
  detail: string | null;
}

/** What `ops status` prints: the figures an on-call looks at first. */
export interface Status {
  /** Postgres and Temporal probed by this command, each within its deadline. */
  dependencies: DependencyView[];
  /** This host's clock minus Postgres's (null: Postgres did not answer). */
  clock_skew_seconds: number | null;
  /** Each `--process` metrics URL: what that process sees. */
  processes: ProcessView[];
  /** The durable queues, read by the same statement as the scrape-time gauges; null while Postgres does not answer. */
  backlogs: Backlogs | null;
  webhook_endpoints: { failing: number; disabled: number } | null;
  sessions_processing: number | null;
  temporal: { reachable: boolean; namespace: string; missing_search_attributes: string[] | null; error?: string };
}

export interface StatusOptions {
  namespace: string;
  /** The deadlines of the probes: DB_QUERY_TIMEOUT_MS and TEMPORAL_CALL_TIMEOUT_MS. */
  postgresDeadlineMs: number;
  temporalDeadlineMs: number;
  /** Metrics base URLs of the processes to ask (`http://10.0.0.5:9464`). */
  processes: string[];
}

/** How long one process's /readyz or /metrics may take to answer `ops status`. */
const PROCESS_TIMEOUT_MS = 3000;

/** Webhook endpoints failing (enabled, the 3-day clock running) and disabled; sessions with a payment in progress. */
async function endpointsAndSessions(db: Db) {
  const { rows } = await db.raw(
    `SELECT (SELECT count(*) FROM webhook_endpoints WHERE status = 'enabled' AND failing_since IS NOT NULL) AS failing,
            (SELECT count(*) FROM webhook_endpoints WHERE status = 'disabled') AS disabled,
            (SELECT count(*) FROM checkout_sessions WHERE status = 'processing') AS processing`,
  );
  const [row] = rows as Array<Record<'failing' | 'disabled' | 'processing', string>>;
  return {
    webhook_endpoints: { failing: Number(row.failing), disabled: Number(row.disabled) },
    sessions_processing: Number(row.processing),
  };
}

const viewOf = (result: ProbeResult): DependencyView => ({
  dependency: result.dependency,
  ok: result.ok,
  ms: result.ms,
  deadline: `${result.deadline} ${result.deadline_ms} ms`,
  detail: result.fault?.detail ?? null,
});

/** Temporal probed and its namespace's search attributes read, each within `deadlineMs`. */
async function temporalStatus(connect: (() => Promise<Client>) | undefined, namespace: string, deadlineMs: number) {
  const deadline = `TEMPORAL_CALL_TIMEOUT_MS ${deadlineMs} ms`;
  if (!connect) {
    const detail = 'no Temporal connection';
    return {
      view: { dependency: 'temporal' as const, ok: false, ms: 0, deadline, detail },
      state: { reachable: false, namespace, missing_search_attributes: null, error: detail },
    };
  }
  const started = Date.now();
  let client: Client;
  try {
    client = await withDeadline('temporal', deadlineMs, connect);
  } catch (err) {
    const detail = faultOf(err, 'TEMPORAL_CALL_TIMEOUT_MS').detail;
    return {
      view: { dependency: 'temporal' as const, ok: false, ms: Date.now() - started, deadline, detail },
      state: { reachable: false, namespace, missing_search_attributes: null, error: detail },
    };
  }
  const probe = await probeTemporal(client.connection, deadlineMs);
  const view = { ...viewOf(probe), ms: Date.now() - started };
  if (!probe.ok)
    return { view, state: { reachable: false, namespace, missing_search_attributes: null, error: view.detail! } };
  try {
    const missing = await withDeadline('search attributes', deadlineMs, () =>
      missingSearchAttributes(client.connection, namespace),
    );
    return { view, state: { reachable: true, namespace, missing_search_attributes: missing } };
  } catch (err) {
    const error = faultOf(err, 'TEMPORAL_CALL_TIMEOUT_MS').detail;
    return { view, state: { reachable: true, namespace, missing_search_attributes: null, error } };
  }
}

/** The value of the sample `name` (with `labels`, e.g. `dependency="postgres"`) in exposition `text`. */
function sample(text: string, name: string, labels = ''): number | null {
  const line = text
    .split('\n')
    .find((l) => (labels ? l.startsWith(`${name}{`) && l.includes(labels) : l.startsWith(`${name} `)));
  const value = line ? Number(line.slice(line.lastIndexOf(' ') + 1)) : NaN;
  return Number.isFinite(value) ? value : null;
}

/** One process's own view of its dependencies, from its metrics port, each read within PROCESS_TIMEOUT_MS. */
async function processView(url: string): Promise<ProcessView> {
  const base = url.replace(/\/+$/, '');
  const view: ProcessView = {
    url: base,
    role: null,
    status: 'unreachable',
    postgres: null,
    temporal: null,
    clock_skew_seconds: null,
    detail: null,
  };
  const get = (path: string) => fetch(`${base}${path}`, { signal: AbortSignal.timeout(PROCESS_TIMEOUT_MS) });
  try {
    const [readyz, metrics] = await Promise.all([get('/readyz'), get('/metrics')]);
    const ready = (await readyz.json()) as {
      status: string;
      checks: Array<{ name: string; ok: boolean; detail?: string }>;
    };
    const text = await metrics.text();
    const up = (dependency: string) => {
      const v = sample(text, 'svc_dependency_up', `dependency="${dependency}"`);
      return v === null ? null : v === 1 ? 'up' : 'down';
    };
    const role = /^svc_process_role_info\{role="(\w+)"\} 1/m.exec(text)?.[1] ?? null;
    const failing = ready.checks.filter((c) => !c.ok).map((c) => `${c.name}: ${c.detail ?? 'failing'}`);
    return {
      ...view,
      role,
      status: ready.status,
      postgres: up('postgres'),
      temporal: up('temporal'),
      clock_skew_seconds: sample(text, 'svc_clock_skew_seconds'),
      detail: failing.length ? failing.join('; ') : null,
    };
  } catch (err) {
    // fetch's own message (`fetch failed`) says nothing: its cause does (`connect ECONNREFUSED …`).
    const { message, cause } = err as { message?: string; cause?: { message?: string } };
    return { ...view, detail: cause?.message ?? message ?? String(err) };
  }
}

/**
 * `ops status`: Postgres and Temporal probed within their deadlines, this host's clock skew, each
 * given process's view, and (when Postgres answers) backlogs, failing endpoints and sessions in
 * payment. Every wait is bounded: with Postgres down it still answers, within its deadline.
 */
export async function readStatus(
  db: Db,
  temporal: (() => Promise<Client>) | undefined,
  options: StatusOptions,
): Promise<Status> {
  const postgresFigures = probePostgres(db, options.postgresDeadlineMs).then(async (postgres) => {
    if (!postgres.result.ok) return { postgres, figures: null };
    try {
      const [backlogs, counts] = await Promise.all([readBacklogs(db), endpointsAndSessions(db)]);
      return { postgres, figures: { backlogs, ...counts } };
    } catch {
      return { postgres, figures: null }; // Postgres went away since the probe: the figures are unknown, not zero
    }
  });
  const [{ postgres, figures }, temporalState, processes] = await Promise.all([
    postgresFigures,
    temporalStatus(temporal, options.namespace, options.temporalDeadlineMs),
    Promise.all(options.processes.map(processView)),
  ]);
  return {
    dependencies: [viewOf(postgres.result), temporalState.view],
    clock_skew_seconds: postgres.skewSeconds === undefined ? null : Math.round(postgres.skewSeconds * 1000) / 1000,
    processes,
    backlogs: figures?.backlogs ?? null,
    webhook_endpoints: figures?.webhook_endpoints ?? null,
    sessions_processing: figures?.sessions_processing ?? null,
    temporal: temporalState.state,
  };
}

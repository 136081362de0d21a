import type { WorkflowService } from '@temporalio/client';
import { Gauge } from 'prom-client';
import type { Db } from '../db/knex';
import { log } from '../lib/log';
import { missingSearchAttributes, type OperatorConnection } from '../temporal/search-attribute-setup';
import { faultOf, type Fault } from './faults';
import { registry, withDeadline, type ReadinessCheck } from './metrics';

export type Dependency = 'postgres' | 'temporal';

const dependencyUp = new Gauge({
  name: 'svc_dependency_up',
  help: "1 when this process's last probe of the dependency (postgres|temporal) answered within its deadline, else 0; probed every DEPENDENCY_PROBE_INTERVAL_MS.",
  labelNames: ['dependency'] as const,
  registers: [registry],
});

/** When each dependency last answered a probe, and whether its latest probe answered (monotonic ms). */
const answered = new Map<Dependency, { lastOkAt: number; latestOk: boolean }>();
const processStart = performance.now();

// Registered with `registry`; its value is computed at each scrape.
new Gauge({
  name: 'svc_dependency_unreachable_seconds',
  help: "While this process's latest probe of the dependency (postgres|temporal) did not answer: the seconds since one last did (since the process started, if none has); 0 while it answers. Read at scrape time on the monotonic clock: a link that flaps keeps it low, a cut makes it grow.",
  labelNames: ['dependency'] as const,
  registers: [registry],
  collect() {
    const now = performance.now();
    for (const [dependency, state] of answered)
      this.set({ dependency }, state.latestOk ? 0 : Math.round((now - state.lastOkAt) / 100) / 10);
  },
});

/**
 * After a probe that did not answer, the next one comes this soon (not a whole interval later): a
 * dependency back for a few seconds is seen back, so a flapping link never looks like a cut.
 */
export const DOWN_RETRY_MS = 1000;

const clockSkew = new Gauge({
  name: 'svc_clock_skew_seconds',
  help: "This process's clock minus Postgres's (clock_timestamp(), corrected by half the round trip), sampled with the Postgres probe; the last sample while Postgres does not answer.",
  registers: [registry],
});

/** What one probe of a dependency found. */
export interface ProbeResult {
  dependency: Dependency;
  ok: boolean;
  /** How long it took to answer or fail. */
  ms: number;
  /** The deadline it had: its setting's name and value. */
  deadline: string;
  deadline_ms: number;
  fault?: Fault;
}

/** The bound of each probe, by the setting it comes from. */
export interface ProbeDeadlines {
  /** DB_QUERY_TIMEOUT_MS: a pooled `SELECT clock_timestamp()`, the pool acquire included. */
  postgresMs: number;
  /** TEMPORAL_CALL_TIMEOUT_MS: getSystemInfo. */
  temporalMs: number;
}

type TemporalConnection = OperatorConnection & { workflowService: WorkflowService };

/**
 * Probes Postgres with `SELECT clock_timestamp()` through `db`'s pool within `deadlineMs`: whether
 * it answered, and the clock skew (this clock minus Postgres's at the middle of the round trip).
 */
export async function probePostgres(
  db: Db,
  deadlineMs: number,
): Promise<{ result: ProbeResult; skewSeconds?: number }> {
  const sent = Date.now();
  const base = { dependency: 'postgres' as const, deadline: 'DB_QUERY_TIMEOUT_MS', deadline_ms: deadlineMs };
  try {
    const { rows } = await withDeadline('postgres', deadlineMs, () =>
      db.raw<{ rows: Array<{ now: Date }> }>('SELECT clock_timestamp() AS now'),
    );
    const received = Date.now();
    const skewSeconds = ((sent + received) / 2 - new Date(rows[0].now).getTime()) / 1000;
    return { result: { ...base, ok: true, ms: received - sent }, skewSeconds };
  } catch (err) {
    return { result: { ...base, ok: false, ms: Date.now() - sent, fault: faultOf(err, base.deadline) } };
  }
}

/** Probes Temporal on `connection` with getSystemInfo within `deadlineMs`. */
export async function probeTemporal(
  connection: { workflowService: WorkflowService },
  deadlineMs: number,
): Promise<ProbeResult> {
  const sent = Date.now();
  const base = { dependency: 'temporal' as const, deadline: 'TEMPORAL_CALL_TIMEOUT_MS', deadline_ms: deadlineMs };
  try {
    await withDeadline('temporal', deadlineMs, () => connection.workflowService.getSystemInfo({}));
    return { ...base, ok: true, ms: Date.now() - sent };
  } catch (err) {
    return { ...base, ok: false, ms: Date.now() - sent, fault: faultOf(err, base.deadline) };
  }
}

/** `result` as a readiness check: its dependency, and why it fails (the fault's sentence). */
function checkOf(result: ProbeResult): ReadinessCheck {
  return result.ok
    ? { name: result.dependency, ok: true }
    : { name: result.dependency, ok: false, detail: result.fault?.detail };
}

/** Whether `namespace` has every custom search attribute (which starts and wakes need); Temporal answered already. */
async function searchAttributesCheck(connection: TemporalConnection, namespace: string, deadlineMs: number) {
  try {
    const missing = await withDeadline('search attributes', deadlineMs, () =>
      missingSearchAttributes(connection, namespace),
    );
    return missing === null
      ? { name: 'search_attributes', ok: true, detail: 'not checked: no operator rights to list them' }
      : missing.length
        ? { name: 'search_attributes', ok: false, detail: `namespace ${namespace} lacks ${missing.join(', ')}` }
        : { name: 'search_attributes', ok: true };
  } catch (err) {
    return { name: 'search_attributes', ok: false, detail: faultOf(err, 'TEMPORAL_CALL_TIMEOUT_MS').detail };
  }
}

export interface DependencyProbeOptions {
  db: Db;
  /** The process's Temporal connection; undefined while it is still connecting (not probed, not ready). */
  connection: () => TemporalConnection | undefined;
  namespace: string;
  deadlines: ProbeDeadlines;
  intervalMs: number;
  /**
   * Whether the process is out of rotation while Temporal does not answer: the worker (it can do
   * nothing without it); not the API, whose writes reach Temporal through the handoff relay
   * (docs/decisions.md, "Readiness and a slow Temporal").
   */
  temporalRequired: boolean;
}

export interface DependencyProbes {
  /**
   * The readiness checks: the last probe's while it passed within one interval, else a fresh probe
   * (joined when one runs), so a failing dependency is re-checked and a healthy one costs nothing.
   */
  checks(): Promise<ReadinessCheck[]>;
  stop(): void;
}

/**
 * Probes Postgres and Temporal at once and about every `intervalMs` after (each within its own deadline),
 * sets `svc_dependency_up` and `svc_clock_skew_seconds`, and logs each flip of a dependency (down:
 * a warning naming the deadline and the error class; up again: how long it was down).
 */
export function startDependencyProbes(options: DependencyProbeOptions): DependencyProbes {
  const { db, deadlines, namespace } = options;
  const downSince = new Map<Dependency, number>();
  let last: { at: number; checks: ReadinessCheck[] } | undefined;
  let running: Promise<ReadinessCheck[]> | undefined;
  let timer: NodeJS.Timeout | undefined;
  let stopped = false;
  let allAnswered = true;

  const record = (result: ProbeResult) => {
    if (stopped) return; // a probe that ends while the process closes its connections says nothing
    dependencyUp.set({ dependency: result.dependency }, result.ok ? 1 : 0);
    const state = answered.get(result.dependency) ?? { lastOkAt: processStart, latestOk: false };
    answered.set(result.dependency, { lastOkAt: result.ok ? performance.now() : state.lastOkAt, latestOk: result.ok });
    const wasDown = downSince.get(result.dependency);
    if (!result.ok && wasDown === undefined) {
      downSince.set(result.dependency, Date.now());
      log.warn(`dependency down: ${result.dependency} did not answer its probe`, {
        dependency: result.dependency,
        deadline: result.deadline,
        deadline_ms: result.deadline_ms,
        error_class: result.fault?.error_class,
        detail: result.fault?.detail,
      });
    } else if (result.ok && wasDown !== undefined) {
      downSince.delete(result.dependency);
      log.info(`dependency up: ${result.dependency} answers its probe again`, {
        dependency: result.dependency,
        down_ms: Date.now() - wasDown,
        answer_ms: result.ms,
      });
    }
  };

  const probe = async (): Promise<ReadinessCheck[]> => {
    const connection = options.connection();
    // Each recorded as it ends: one dependency's deadline does not delay what the other says.
    const [postgres, temporal] = await Promise.all([
      probePostgres(db, deadlines.postgresMs).then((p) => {
        record(p.result);
        return p;
      }),
      connection
        ? probeTemporal(connection, deadlines.temporalMs).then((t) => {
            record(t);
            return t;
          })
        : undefined,
    ]);
    if (postgres.skewSeconds !== undefined) clockSkew.set(postgres.skewSeconds);
    const checks: ReadinessCheck[] = [checkOf(postgres.result)];
    if (!connection) checks.push({ name: 'temporal', ok: false, detail: 'connecting' });
    else if (temporal) {
      const check = checkOf(temporal);
      checks.push(options.temporalRequired || check.ok ? check : { ...check, required: false });
      if (temporal.ok) checks.push(await searchAttributesCheck(connection, namespace, deadlines.temporalMs));
    }
    last = { at: Date.now(), checks };
    allAnswered = postgres.result.ok && temporal?.ok !== false;
    return checks;
  };

  const probeOnce = () => {
    running ??= probe().finally(() => {
      running = undefined;
    });
    return running;
  };

  const loop = () => {
    void probeOnce()
      .catch((err) => log.error('dependency probe failed', { error: err }))
      .finally(() => {
        // ±20 % jitter: a link flapping at a fixed period cannot line up with every probe. Sooner
        // while a dependency does not answer, to see it back as soon as it is.
        const next = allAnswered ? options.intervalMs : Math.min(options.intervalMs, DOWN_RETRY_MS);
        if (!stopped) timer = setTimeout(loop, next * (0.8 + Math.random() * 0.4));
      });
  };
  loop();

  return {
    checks() {
      const fresh = last && Date.now() - last.at < options.intervalMs && last.checks.every((c) => c.ok);
      return fresh ? Promise.resolve(last!.checks) : probeOnce();
    },
    stop() {
      stopped = true;
      clearTimeout(timer);
    },
  };
}

/** The worker polls its task queues (state RUNNING). */
export function workerReady(worker: { getState(): string } | undefined): ReadinessCheck {
  const state = worker?.getState() ?? 'INITIALIZED';
  return state === 'RUNNING' ? { name: 'worker', ok: true } : { name: 'worker', ok: false, detail: `worker ${state}` };
}

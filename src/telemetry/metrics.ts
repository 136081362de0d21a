import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { collectDefaultMetrics, Gauge, Registry } from 'prom-client';
import type { Db } from '../db/knex';
import { log } from '../lib/log';

/**
 * The process's metrics registry. Every metric of ours is defined in one module per area under
 * src/telemetry/ (http, checkout, partner, webhooks, durable hops, the Postgres pool) and
 * registered here; names and labels are the contract in docs/observability.md.
 */
export const registry = new Registry();

// Event-loop lag, heap, GC, handles: prom-client's defaults, under our prefix.
collectDefaultMetrics({ register: registry, prefix: 'svc_' });

const roleInfo = new Gauge({
  name: 'svc_process_role_info',
  help: 'Always 1; the role label says which process this is.',
  labelNames: ['role'] as const,
  registers: [registry],
});

/** 1 from the stop signal (SIGTERM, SIGINT) until the process exits: a target going away on purpose, not failing. */
export const processStopping = new Gauge({
  name: 'svc_process_stopping',
  help: '1 while the process stops gracefully (from its SIGTERM or SIGINT until it exits), else 0.',
  registers: [registry],
});

const buildInfo = new Gauge({
  name: 'svc_build_info',
  help: 'Always 1; version is the release in package.json, build_id the worker deployment build (unversioned: none declared).',
  labelNames: ['version', 'build_id'] as const,
  registers: [registry],
});

/** Sets `svc_build_info` to this process's release and build (one series: a process has one). */
export function setBuildInfo(labels: { version: string; build_id: string }): void {
  buildInfo.reset();
  buildInfo.set(labels, 1);
}

/** Gauges of the knex (tarn) pool `db`, read at scrape time. */
export function registerDbPoolMetrics(db: Db): void {
  const pool = () =>
    db.client.pool as { numUsed(): number; numFree(): number; numPendingAcquires(): number } | undefined;
  new Gauge({
    name: 'svc_db_pool_connections',
    help: 'Postgres connections of this process by state (used: checked out; idle: open and free).',
    labelNames: ['state'] as const,
    registers: [registry],
    collect() {
      this.set({ state: 'used' }, pool()?.numUsed() ?? 0);
      this.set({ state: 'idle' }, pool()?.numFree() ?? 0);
    },
  });
  new Gauge({
    name: 'svc_db_pool_waiting',
    help: 'Queries waiting for a Postgres connection of this process (the pool is exhausted while above 0).',
    registers: [registry],
    collect() {
      this.set(pool()?.numPendingAcquires() ?? 0);
    },
  });
}

/** One readiness condition: its name, whether it holds, and why not. */
export interface ReadinessCheck {
  name: string;
  ok: boolean;
  /** false: reported, but failing it leaves the process ready (`degraded`): the API while Temporal does not answer. */
  required?: false;
  detail?: string;
}

export interface MetricsServerOptions {
  role: 'api' | 'worker';
  host: string;
  port: number;
  /** The readiness conditions, evaluated on every `/readyz`. */
  readiness: () => Promise<ReadinessCheck[]>;
  /** More exposition text appended to `/metrics` (the Temporal SDK's exporter, read from its loopback port). */
  extra?: () => Promise<string>;
}

export interface MetricsServer {
  /** `http://host:port`. */
  url: string;
  close(): Promise<void>;
}

/** What `withDeadline` rejects with when its deadline passes first. */
export class DeadlineExceeded extends Error {
  constructor(
    what: string,
    readonly ms: number,
  ) {
    super(`${what}: no answer within ${ms} ms`);
    this.name = 'DeadlineExceeded';
  }
}

/** Runs `check` with a deadline; a check that hangs (a dead Temporal connection) counts as failed. */
export async function withDeadline<T>(what: string, ms: number, check: () => Promise<T>): Promise<T> {
  let timer: NodeJS.Timeout | undefined;
  const deadline = new Promise<never>((_, reject) => {
    timer = setTimeout(() => reject(new DeadlineExceeded(what, ms)), ms);
  });
  try {
    return await Promise.race([check(), deadline]);
  } finally {
    clearTimeout(timer);
  }
}

/** The exposition text of the Temporal SDK's own Prometheus exporter at `url`; empty (and logged) if it does not answer. */
export async function readSdkMetrics(url: string): Promise<string> {
  try {
    const res = await fetch(url, { signal: AbortSignal.timeout(2000) });
    if (!res.ok) throw new Error(`HTTP ${res.status}`);
    return await res.text();
  } catch (err) {
    log.warn('temporal sdk metrics unavailable', { url, error: err instanceof Error ? err.message : String(err) });
    return '';
  }
}

/**
 * The process's metrics server, on its own port (never the public API's): `/metrics` (ours and
 * `extra`), `/livez` (the event loop answers) and `/readyz` (200 `ready` when every readiness check holds,
 * 200 `degraded` when only checks that are not required fail, else 503 `not_ready`; each check
 * names its dependency and why it fails).
 */
export async function startMetricsServer(options: MetricsServerOptions): Promise<MetricsServer> {
  roleInfo.set({ role: options.role }, 1);
  const server: Server = createServer((req, res) => {
    const path = (req.url ?? '/').split('?')[0];
    const answer = async () => {
      if (req.method !== 'GET' && req.method !== 'HEAD') return send(405, 'text/plain', 'method not allowed\n');
      if (path === '/metrics') {
        const [ours, extra] = await Promise.all([registry.metrics(), options.extra?.() ?? '']);
        return send(200, registry.contentType, extra ? `${ours}\n${extra}` : ours);
      }
      if (path === '/livez') return send(200, 'text/plain', 'ok\n');
      if (path === '/readyz') {
        const checks = await options.readiness();
        const ready = checks.every((c) => c.ok || c.required === false);
        const status = !ready ? 'not_ready' : checks.every((c) => c.ok) ? 'ready' : 'degraded';
        return send(ready ? 200 : 503, 'application/json', `${JSON.stringify({ status, checks })}\n`);
      }
      return send(404, 'text/plain', 'not found\n');
    };
    const send = (status: number, type: string, body: string) => {
      res.writeHead(status, { 'content-type': type, 'cache-control': 'no-store' });
      res.end(req.method === 'HEAD' ? undefined : body);
    };
    answer().catch((err) => {
      log.error('metrics endpoint failed', { path, error: err instanceof Error ? err.message : String(err) });
      if (!res.headersSent) send(500, 'text/plain', 'internal error\n');
    });
  });
  await new Promise<void>((resolve, reject) => {
    server.once('error', reject);
    server.listen(options.port, options.host, () => resolve());
  });
  const { port } = server.address() as AddressInfo;
  const host = options.host.includes(':') ? `[${options.host}]` : options.host;
  return {
    url: `http://${host}:${port}`,
    close: () => new Promise<void>((resolve) => server.close(() => resolve())),
  };
}

/**
 * Runs `count` once `db`'s transaction commits (at once outside one): a counter bumped for a write
 * that then rolls back would count a transition that never happened.
 */
export function afterCommit(db: Db, count: () => void): void {
  if (!db.isTransaction) return count();
  (db as Db & { executionPromise: Promise<unknown> }).executionPromise.then(count, () => undefined);
}

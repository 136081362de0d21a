import { spawn } from 'node:child_process';
import { closeSync, openSync, readFileSync } from 'node:fs';
import http from 'node:http';
import { join } from 'node:path';
import { performance } from 'node:perf_hooks';
import { type Child, type ExitInfo, freePort, SERVICE_NODE_FLAGS, startChild, waitFor } from '../processes';
import type { ReleaseTree } from './releases';

/** One API or worker process of a release, as a deploy sees it. */
export interface ServiceProcess {
  /** `api-a`, `worker-b`, … with the release: `api-a (0.1.0)`. */
  name: string;
  role: 'api' | 'worker';
  tree: ReleaseTree;
  child: Child;
  logFile: string;
  /** The public API (APIs only). */
  baseUrl?: string;
  /** `/readyz` on the process's metrics port. */
  readyUrl: string;
  /** Milliseconds from SIGTERM to exit, and how it exited, once stopped. */
  stopped?: { ms: number; exit: ExitInfo };
}

/** Starts `entry` (a TypeScript file of `tree`) with that tree's node and tsx, its output appended to `logFile`. */
function startTreeChild(name: string, tree: ReleaseTree, entry: string, env: NodeJS.ProcessEnv, logFile: string) {
  const out = openSync(logFile, 'a');
  const child = startChild(
    name,
    tree.node,
    [...SERVICE_NODE_FLAGS, '--import', 'tsx', entry],
    { cwd: tree.dir, env, stdio: ['ignore', out, out] },
    { logFile },
  );
  closeSync(out);
  return child;
}

/**
 * Starts an API or a worker of `tree` as production runs it (node directly, so SIGTERM reaches it),
 * on free ports of its own, with `env` (the database, Temporal, the task queue, secrets) shared by
 * the whole fleet. Its Postgres connections carry its name (application_name) so that lock waits
 * can be told apart.
 */
export async function startService(
  role: 'api' | 'worker',
  letter: string,
  tree: ReleaseTree,
  env: NodeJS.ProcessEnv,
  logDir: string,
): Promise<ServiceProcess> {
  const name = `${role}-${letter} (${tree.label})`;
  const [port, metricsPort, workerMetricsPort, sdkPort] = await Promise.all([
    freePort(),
    freePort(),
    freePort(),
    freePort(),
  ]);
  const logFile = join(logDir, `${role}-${letter}-${tree.buildId}.log`);
  const processEnv: NodeJS.ProcessEnv = {
    ...env,
    HOST: '127.0.0.1',
    PORT: String(port),
    METRICS_HOST: '127.0.0.1',
    METRICS_PORT: String(metricsPort),
    WORKER_METRICS_PORT: String(workerMetricsPort),
    TEMPORAL_SDK_METRICS_PORT: String(sdkPort),
    TEMPORAL_BUILD_ID: tree.buildId,
    PGAPPNAME: `${role}-${letter}-${tree.buildId}`,
  };
  const entry = role === 'api' ? 'src/main/api.ts' : 'src/main/worker.ts';
  const child = startTreeChild(name, tree, entry, processEnv, logFile);
  const readyUrl = `http://127.0.0.1:${role === 'api' ? metricsPort : workerMetricsPort}/readyz`;
  const service: ServiceProcess = {
    name,
    role,
    tree,
    child,
    logFile,
    readyUrl,
    baseUrl: role === 'api' ? `http://127.0.0.1:${port}` : undefined,
  };
  await waitFor(`${name} /readyz`, () => isReady(service), { timeoutMs: 180_000, watched: [child], intervalMs: 200 });
  return service;
}

/** `/readyz` answers 200 within a second. */
export async function isReady(service: ServiceProcess): Promise<boolean> {
  try {
    const res = await fetch(service.readyUrl, { signal: AbortSignal.timeout(1000) });
    await res.arrayBuffer();
    return res.status === 200;
  } catch {
    return false;
  }
}

/** Sends SIGTERM and waits for the exit (SIGKILL after `graceMs`), recording how long it took and how it ended. */
export async function stopService(service: ServiceProcess, graceMs = 60_000): Promise<void> {
  const started = performance.now();
  const exit = await service.child.stop(graceMs);
  service.stopped = { ms: Math.round(performance.now() - started), exit };
}

/**
 * What a process's log says went wrong: lines at level error (ours, or the SDK's), and activity
 * attempts that failed (the SDK's warning "Activity failed": retried, so no history shows them).
 */
export function logFindings(service: ServiceProcess): { errors: string[]; failedActivities: string[] } {
  let lines: string[] = [];
  try {
    lines = readFileSync(service.logFile, 'utf8').split('\n');
  } catch {
    return { errors: [], failedActivities: [] };
  }
  return {
    errors: lines.filter((line) => /"level":"error"|\bERROR\b|\[ERROR\]/.test(line)),
    failedActivities: lines.filter((line) => line.includes('"msg":"Activity failed"')),
  };
}

/** Runs a command of `tree` (`src/main/migrate.ts`, `src/cli/main.ts`) to its end; returns its exit code and output. */
export function runTreeCommand(
  tree: ReleaseTree,
  entry: string,
  args: string[],
  env: NodeJS.ProcessEnv,
): Promise<{ code: number | null; stdout: string; stderr: string; ms: number }> {
  const started = performance.now();
  return new Promise((resolve, reject) => {
    const child = spawn(tree.node, ['--import', 'tsx', entry, ...args], {
      cwd: tree.dir,
      env,
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    let stdout = '';
    let stderr = '';
    child.stdout.on('data', (chunk: Buffer) => (stdout += chunk.toString()));
    child.stderr.on('data', (chunk: Buffer) => (stderr += chunk.toString()));
    child.on('error', reject);
    child.on('exit', (code) => resolve({ code, stdout, stderr, ms: Math.round(performance.now() - started) }));
  });
}

/** One backend of the balancer. */
interface Backend {
  service: ServiceProcess;
  agent: http.Agent;
  /** Serving: passed its last health check and not taken out. */
  healthy: boolean;
  /** Taken out of rotation by the deploy (no health check brings it back). */
  removed: boolean;
  /** Health checks failed in a row. */
  failures: number;
}

/** How the balancer judges its backends (the defaults: out at the first failed check, no fail-open). */
export interface BalancerOptions {
  /** Failed checks in a row that take a backend out of rotation. */
  unhealthyAfter?: number;
  /** With no healthy backend, send to every backend not taken out (as Envoy's panic mode or an ALB does). */
  failOpen?: boolean;
}

/** What one request through the balancer came to. */
export interface Outcome {
  status: number | null;
  /** The connection failed (refused, reset) and no answer came. */
  connectionError?: string;
  text: string;
  ms: number;
  backend?: string;
  /** Sent again once on a new connection: the server had closed the kept-alive one as it went out. */
  resent: boolean;
}

/**
 * A load balancer on the client side, as one in front of the APIs works: it health-checks every
 * backend's `/readyz` every `intervalMs` and sends each request to the next healthy one, over
 * kept-alive connections. A backend that fails its check (an API draining after SIGTERM) gets no
 * new requests; one taken out by the deploy gets none at all.
 */
export class Balancer {
  private readonly backends: Backend[] = [];
  private next = 0;
  private timer: NodeJS.Timeout | undefined;

  constructor(
    private readonly intervalMs = 200,
    private readonly options: BalancerOptions = {},
  ) {}

  /** Health checks from now on, until `close`. */
  start(): void {
    const tick = async () => {
      await Promise.all(
        this.backends
          .filter((b) => !b.removed)
          .map(async (b) => {
            const ready = await isReady(b.service);
            b.failures = ready ? 0 : b.failures + 1;
            b.healthy = ready || (b.healthy && b.failures < (this.options.unhealthyAfter ?? 1));
          }),
      );
      this.timer = setTimeout(() => void tick(), this.intervalMs);
    };
    void tick();
  }

  /** Puts a started API into rotation (it is healthy: `startService` waited for it). */
  add(service: ServiceProcess): void {
    this.backends.push({
      service,
      // Idle connections close after 4 s, before the API's keep-alive timeout (Node's 5 s) closes
      // them from its side, as a balancer in front of Node is configured.
      agent: new http.Agent({ keepAlive: true, maxSockets: 64, timeout: 4_000 }),
      healthy: true,
      removed: false,
      failures: 0,
    });
  }

  /** Takes an API out of rotation (the deploy deregisters it before stopping one that cannot drain itself). */
  remove(service: ServiceProcess): void {
    for (const b of this.backends) if (b.service === service) b.removed = true;
  }

  /** The APIs in rotation now. */
  serving(): string[] {
    return this.backends.filter((b) => b.healthy && !b.removed).map((b) => b.service.name);
  }

  /** Sends a request to the next healthy backend. */
  async request(
    method: string,
    path: string,
    headers: Record<string, string>,
    body?: unknown,
    timeoutMs = 30_000,
  ): Promise<Outcome> {
    const started = performance.now();
    let live = this.backends.filter((b) => b.healthy && !b.removed);
    if (live.length === 0 && this.options.failOpen) live = this.backends.filter((b) => !b.removed);
    if (live.length === 0)
      return { status: null, connectionError: 'no backend in rotation', text: '', ms: 0, resent: false };
    const backend = live[this.next++ % live.length];
    const text = body === undefined ? undefined : JSON.stringify(body);
    const allHeaders: Record<string, string> = { ...headers };
    if (text !== undefined) {
      allHeaders['content-type'] = 'application/json';
      allHeaders['content-length'] = String(Buffer.byteLength(text));
    }
    const send = (resent: boolean): Promise<Outcome> =>
      new Promise((resolve) => {
        const req = http.request(
          `${backend.service.baseUrl}${path}`,
          // A resend goes on a new connection: another idle one of the pool may be closing too.
          { method, headers: allHeaders, agent: resent ? false : backend.agent, timeout: timeoutMs },
          (res) => {
            const chunks: Buffer[] = [];
            res.on('data', (chunk: Buffer) => chunks.push(chunk));
            res.on('error', (err) => finish(null, err.message));
            res.on('end', () => finish(res.statusCode ?? null, undefined, Buffer.concat(chunks).toString('utf8')));
          },
        );
        const finish = (status: number | null, error?: string, body = '') =>
          resolve({
            status,
            connectionError: error,
            text: body,
            ms: performance.now() - started,
            backend: backend.service.name,
            resent,
          });
        req.on('timeout', () => req.destroy(new Error(`no answer within ${timeoutMs} ms`)));
        req.on('error', (err: NodeJS.ErrnoException) => {
          // The server closed an idle kept-alive socket as this request went out on it: the
          // request never reached it, so it goes again once on a new socket (as Node's docs advise).
          if (req.reusedSocket && err.code === 'ECONNRESET' && !resent) void send(true).then(resolve);
          else finish(null, err.code ?? err.message);
        });
        req.end(text);
      });
    return send(false);
  }

  close(): void {
    clearTimeout(this.timer);
    for (const b of this.backends) b.agent.destroy();
  }
}

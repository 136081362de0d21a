/** Graceful stops of the API and the worker: the stop signal, the readiness check that fails at once, the close stage and the exit. */
import type { Settings } from '../config';
import { log } from '../lib/log';
import { processStopping, withDeadline, type ReadinessCheck } from '../telemetry/metrics';

/** The signals that ask a process to stop gracefully: SIGTERM (a supervisor, `docker stop`), SIGINT (Ctrl-C). */
export const STOP_SIGNALS = ['SIGTERM', 'SIGINT'] as const;

/** How long the last stage of a stop (pools, connections, the metrics server, tracing) may take in all. */
export const CLOSE_TIMEOUT_MS = 5000;

/** The longest an API's graceful stop takes: the drain, the in-flight bound, the close. */
export function apiStopBoundMs(settings: Pick<Settings, 'SHUTDOWN_DRAIN_MS' | 'SHUTDOWN_TIMEOUT_MS'>): number {
  return settings.SHUTDOWN_DRAIN_MS + settings.SHUTDOWN_TIMEOUT_MS + CLOSE_TIMEOUT_MS;
}

/** The readiness check a stopping process answers with. */
export const stoppingCheck: ReadinessCheck = { name: 'shutdown', ok: false, detail: 'draining' };

export interface StopRequest {
  /** Aborted at the first stop signal (its reason the signal's name): code that takes new work looks at it. */
  readonly signal: AbortSignal;
  /** Resolves with the first stop signal's name. */
  readonly requested: Promise<NodeJS.Signals>;
  /**
   * Start-up is over: from now on a stop signal runs the caller's stop sequence. Before this call
   * a stop signal ends the process at once with 0: nothing is served yet, so nothing can be lost.
   */
  serving(): void;
  /** Milliseconds since the first stop signal (0 before it). */
  elapsedMs(): number;
}

/**
 * Takes over SIGTERM and SIGINT for the process `role`. The first one aborts `signal`, sets
 * `svc_process_stopping` and resolves `requested`; a later one is logged and ignored, so a second
 * signal can never cut a drain short into a crash (the stop has its own bounds; SIGKILL ends a
 * process at once).
 */
export function listenForStop(role: 'api' | 'worker'): StopRequest {
  const controller = new AbortController();
  let serving = false;
  let atMs = 0;
  let resolveRequested!: (signal: NodeJS.Signals) => void;
  const requested = new Promise<NodeJS.Signals>((resolve) => (resolveRequested = resolve));
  const elapsedMs = () => (atMs === 0 ? 0 : Date.now() - atMs);
  const onSignal = (signal: NodeJS.Signals) => {
    if (controller.signal.aborted) {
      log.warn(`${role} already stopping: ${signal} ignored`, { signal, stopping_for_ms: elapsedMs() });
      return;
    }
    atMs = Date.now();
    controller.abort(signal);
    processStopping.set(1);
    log.info(`${role} received ${signal}`, { stage: 'signal', signal });
    if (!serving) exitStopped(role, 'stopped during start-up: nothing served yet', 0);
    resolveRequested(signal);
  };
  for (const signal of STOP_SIGNALS) process.on(signal, onSignal);
  return {
    signal: controller.signal,
    requested,
    serving: () => void (serving = true),
    elapsedMs,
  };
}

/**
 * `checks` while the process serves; once it stops, only `stoppingCheck`, at once (Postgres and
 * Temporal are not asked), also for a probe whose checks were still running when the signal came.
 */
export function readyUntilStopped(
  stop: StopRequest,
  checks: () => Promise<ReadinessCheck[]>,
): () => Promise<ReadinessCheck[]> {
  return async () => {
    if (stop.signal.aborted) return [stoppingCheck];
    const results = await checks();
    return stop.signal.aborted ? [stoppingCheck] : results;
  };
}

/**
 * Closes each resource, all at once, within CLOSE_TIMEOUT_MS in all: one that fails or hangs is
 * logged by name and left behind (the process exits next).
 */
export async function closeAll(
  role: 'api' | 'worker',
  closers: Array<[what: string, close: (() => Promise<unknown>) | undefined]>,
): Promise<void> {
  const open = closers.filter((c): c is [string, () => Promise<unknown>] => c[1] !== undefined);
  const results = await Promise.all(
    open.map(([what, close]) =>
      withDeadline(what, CLOSE_TIMEOUT_MS, close).then(
        () => null,
        (err: unknown) => {
          log.warn(`${role} could not close ${what}`, { stage: 'closed', error: err });
          return what;
        },
      ),
    ),
  );
  const left = results.filter((r) => r !== null);
  log.info(`${role} closed`, { stage: 'closed', closed: open.length - left.length, not_closed: left });
}

/** The last line of a stop, then the exit (explicit: a handle left open must not keep a stopped process alive). */
export function exitStopped(
  role: 'api' | 'worker',
  what: string,
  code: number,
  fields: Record<string, unknown> = {},
): never {
  log.info(`${role} ${what}; exiting`, { stage: 'exit', exit_code: code, ...fields });
  process.exit(code);
}

/** The worker process's graceful stop: stop polling, let activities in flight finish within the bound, stop the loops, close, exit 0. */
import type { Worker, WorkerOptions } from '@temporalio/worker';
import type { Settings } from '../config';
import { log } from '../lib/log';
import { CLOSE_TIMEOUT_MS, closeAll, exitStopped, type StopRequest } from '../main/stop';
import { withDeadline } from '../telemetry/metrics';

/** How long activities cancelled at SHUTDOWN_TIMEOUT_MS get to confirm before the worker gives up waiting for them. */
const CANCEL_GRACE_MS = 3000;

/**
 * The Temporal worker's stop bounds: activities in flight may finish within SHUTDOWN_TIMEOUT_MS,
 * are then cancelled, and CANCEL_GRACE_MS later the worker stops waiting for them.
 */
export function workerStopOptions(
  settings: Pick<Settings, 'SHUTDOWN_TIMEOUT_MS'>,
): Pick<WorkerOptions, 'shutdownGraceTime' | 'shutdownForceTime'> {
  return {
    shutdownGraceTime: settings.SHUTDOWN_TIMEOUT_MS,
    shutdownForceTime: settings.SHUTDOWN_TIMEOUT_MS + CANCEL_GRACE_MS,
  };
}

/** The longest a worker's graceful stop takes: the in-flight bound, the cancelled activities' grace, the loops' last pass, the close. */
export function workerStopBoundMs(settings: Pick<Settings, 'SHUTDOWN_TIMEOUT_MS'>): number {
  return settings.SHUTDOWN_TIMEOUT_MS + CANCEL_GRACE_MS + 2 * CLOSE_TIMEOUT_MS;
}

/** Something the worker process runs beside the Temporal worker that finishes its current pass on `stop()`. */
interface Loop {
  stop(): Promise<void>;
}

export interface WorkerProcess {
  stop: StopRequest;
  worker: Worker;
  /** `worker.run()`, already called. */
  running: Promise<void>;
  timeoutMs: number;
  /** The dispatcher and the relays (null: not run here), stopped once the activities are done. */
  loops: Array<[name: string, loop: Loop | null]>;
  /** Closed once the activities and the loops are done. */
  closers: Parameters<typeof closeAll>[1];
}

/**
 * Runs until the stop signal, then stops the process: the Temporal worker stops polling (activities
 * see `stop.signal` and take no new work: `deliverDue` stops claiming) and its activities in flight
 * finish within the bound; then the dispatcher and the relays each finish their current pass (they
 * went on meanwhile: events committed during the drain are still fanned out); then the rest closes
 * and the process exits 0. Throws if the Temporal worker ends by itself (a fatal error).
 */
export async function runUntilStopped(p: WorkerProcess): Promise<never> {
  const ended = await Promise.race([
    p.running.then(
      () => new Error('the Temporal worker stopped by itself'),
      (err: unknown) => err,
    ),
    p.stop.requested.then(() => undefined),
  ]);
  if (ended !== undefined) throw ended;

  log.info('worker draining: /readyz fails, activities in flight finish', {
    stage: 'draining',
    timeout_ms: p.timeoutMs,
  });
  if (p.worker.getState() === 'RUNNING') p.worker.shutdown();
  log.info('worker stopped polling', { stage: 'stopped_accepting' });
  try {
    await p.running;
    log.info('worker activities in flight finished', { stage: 'in_flight_left', cut: 0 });
  } catch (err) {
    // GracefulShutdownPeriodExpiredError: an activity ignored its cancellation; its attempt times out and is retried elsewhere.
    log.error('worker gave up on activities still running past SHUTDOWN_TIMEOUT_MS', {
      stage: 'in_flight_left',
      error: err,
    });
  }
  // Each pass is a few short transactions and Temporal calls; one that hangs is left behind (its claims' leases lapse).
  const loops = p.loops.filter((l): l is [string, Loop] => l[1] !== null);
  await Promise.all(
    loops.map(([name, loop]) =>
      withDeadline(name, CLOSE_TIMEOUT_MS, () => loop.stop()).then(
        () => log.info(`worker ${name} stopped`, { stage: 'in_flight_left' }),
        (err: unknown) => log.error(`worker left the ${name} in its pass`, { stage: 'in_flight_left', error: err }),
      ),
    ),
  );
  await closeAll('worker', p.closers);
  exitStopped('worker', 'stopped', 0, { stop_ms: p.stop.elapsedMs() });
}

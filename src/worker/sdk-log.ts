import { Runtime, type LogLevel, type LogMetadata, type Logger } from '@temporalio/worker';
import { errorCause, log } from '../lib/log';

/** Components whose lines come from our own code (workflow and activity loggers); the rest are the SDK's. */
const APP_COMPONENTS = new Set(['workflow', 'activity', 'nexus']);

/** Our log level for an SDK line: the SDK's own info lines (the bundler's webpack report, worker state changes) are debug. */
function levelFor(level: LogLevel, component: unknown): 'debug' | 'info' | 'warn' | 'error' | undefined {
  if (level === 'ERROR') return 'error';
  if (level === 'WARN') return 'warn';
  if (level === 'INFO') return APP_COMPONENTS.has(String(component)) ? 'info' : 'debug';
  if (level === 'DEBUG') return 'debug';
  return undefined; // TRACE
}

/** The Temporal SDK's log lines in our JSON log format, at the level `levelFor` gives them (errors with their cause). */
const sdkLogger: Logger = {
  log(level: LogLevel, message: string, meta: LogMetadata = {}) {
    const ours = levelFor(level, meta.sdkComponent);
    if (!ours) return;
    const fields = Object.fromEntries(
      Object.entries(meta).map(([key, value]) => [key, value instanceof Error ? errorCause(value) : value]),
    );
    log[ours](message, fields);
  },
  trace: (message, meta) => sdkLogger.log('TRACE', message, meta),
  debug: (message, meta) => sdkLogger.log('DEBUG', message, meta),
  info: (message, meta) => sdkLogger.log('INFO', message, meta),
  warn: (message, meta) => sdkLogger.log('WARN', message, meta),
  error: (message, meta) => sdkLogger.log('ERROR', message, meta),
};

/**
 * Sends the SDK's logging through `sdkLogger` (leaving stop signals to the process) and, given `metricsAddress` (`127.0.0.1:9466`), has the
 * SDK's Prometheus exporter listen there (seconds, `_total` counters, unit suffixes, so the names
 * match Temporal's docs and dashboards); call once, before creating any connection or worker.
 */
export function installSdkLogger(metricsAddress?: string): void {
  Runtime.install({
    logger: sdkLogger,
    // The process's own stop (src/worker/stop.ts) owns SIGTERM and SIGINT and shuts the worker down.
    shutdownSignals: [],
    ...(metricsAddress && {
      telemetryOptions: {
        metrics: {
          prometheus: {
            bindAddress: metricsAddress,
            useSecondsForDurations: true,
            countersTotalSuffix: true,
            unitSuffix: true,
          },
        },
      },
    }),
  });
}

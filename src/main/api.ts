import '../telemetry/instrument'; // first: it patches pg before anything loads it
import { createServer } from 'node:http';
import { loadSettings, requireDatabaseUrl } from '../config';
import { createApp } from '../app';
import { AttemptStreamHub } from '../checkout/attempts/attempt-stream-hub';
import { dbDeadlinesOf } from '../db/deadlines';
import { createDb } from '../db/knex';
import { drainable } from '../http/server-drain';
import { systemClock } from '../lib/clock';
import { log } from '../lib/log';
import { handoffsForgotten } from '../temporal/handoffs';
import { connectTemporal, requireSearchAttributes } from '../temporal/client';
import { startTracing } from '../telemetry/tracing';
import { requireSecretKeyForLive } from '../webhooks/runtime';
import { registerDbPoolMetrics, setBuildInfo, startMetricsServer, type MetricsServer } from '../telemetry/metrics';
import { buildIdOf, releaseVersion } from '../temporal/deployment';
import { startDependencyProbes, type DependencyProbes } from '../telemetry/readiness';
import { closeAll, exitStopped, listenForStop, readyUntilStopped } from './stop';

/**
 * `npm run api`: the HTTP API, stateless; run as many copies as needed. On SIGTERM or SIGINT it
 * stops gracefully: `/readyz` fails at once, its attempt event streams end (the pages reconnect), it serves on for SHUTDOWN_DRAIN_MS (every answer
 * closing its connection) while load balancers take it out, stops accepting, lets the requests in
 * flight finish within SHUTDOWN_TIMEOUT_MS (closing what is left), finishes its handoff deletions,
 * closes everything and exits 0.
 */
async function main(): Promise<void> {
  const stop = listenForStop('api');
  const settings = loadSettings();
  const tracing = startTracing('svc-api');
  const db = createDb(requireDatabaseUrl(settings), settings.DATABASE_POOL_MAX, dbDeadlinesOf(settings));
  await requireSecretKeyForLive(settings, db);
  // Filled in as start-up proceeds; /readyz reports what is not there yet.
  const started: { temporal?: Awaited<ReturnType<typeof connectTemporal>> } = {};
  let metrics: MetricsServer | undefined;
  let probes: DependencyProbes | undefined;
  if (settings.METRICS_PORT) {
    registerDbPoolMetrics(db);
    // Temporal not answering leaves the API ready (degraded): writes reach it through the handoff relay.
    probes = startDependencyProbes({
      db,
      connection: () => started.temporal?.connection,
      namespace: settings.TEMPORAL_NAMESPACE,
      deadlines: { postgresMs: settings.DB_QUERY_TIMEOUT_MS, temporalMs: settings.TEMPORAL_CALL_TIMEOUT_MS },
      intervalMs: settings.DEPENDENCY_PROBE_INTERVAL_MS,
      temporalRequired: false,
    });
    const { checks } = probes;
    // The release this API serves (an API has no Worker Deployment build: its build_id is the one its release's workers declare).
    setBuildInfo({ version: releaseVersion, build_id: buildIdOf(settings) });
    metrics = await startMetricsServer({
      role: 'api',
      host: settings.METRICS_HOST,
      port: settings.METRICS_PORT,
      readiness: readyUntilStopped(stop, checks),
    });
    log.info('api metrics listening', { url: `${metrics.url}/metrics` });
  }
  const temporal = await connectTemporal(settings);
  await requireSearchAttributes(temporal.connection, settings);
  started.temporal = temporal;
  const attemptStreams = new AttemptStreamHub({ db });
  const server = createServer(createApp({ db, settings, clock: systemClock, temporal, attemptStreams }).callback());
  const http = drainable(server);
  await new Promise<void>((resolve, reject) => {
    server.once('error', reject);
    server.listen(settings.PORT, settings.HOST, resolve);
  });
  stop.serving();
  log.info('api listening', {
    url: `http://${settings.HOST}:${settings.PORT}`,
    partner_environment: settings.PARTNER_ENVIRONMENT,
    node: process.version,
  });

  await stop.requested;
  http.closeConnectionsAfterAnswers();
  // An event stream would hold the drain for its whole life: each ends now with `reconnect`, and its page reconnects elsewhere.
  attemptStreams.drainStreams();
  log.info('api draining: /readyz fails, requests are still answered', {
    stage: 'draining',
    drain_ms: settings.SHUTDOWN_DRAIN_MS,
    in_flight: http.inFlight(),
  });
  await new Promise((resolve) => setTimeout(resolve, settings.SHUTDOWN_DRAIN_MS));
  log.info('api stopped accepting', {
    stage: 'stopped_accepting',
    in_flight: http.inFlight(),
    timeout_ms: settings.SHUTDOWN_TIMEOUT_MS,
  });
  const { inFlight, cut } = await http.close(settings.SHUTDOWN_TIMEOUT_MS);
  const left = { stage: 'in_flight_left', in_flight: inFlight, answered: inFlight - cut, cut };
  if (cut > 0) log.warn('api closed requests still in flight at SHUTDOWN_TIMEOUT_MS', left);
  else log.info('api answered every request in flight', left);
  probes?.stop();
  await closeAll('api', [
    // Delivered handoffs still being deleted: let that finish before the pool goes (the relay would only repeat them).
    ['postgres', () => handoffsForgotten(db).finally(() => db.destroy())],
    ['temporal', () => temporal.connection.close()],
    ['attempt streams listener', () => attemptStreams.close()],
    ['metrics server', metrics?.close],
    ['tracing', () => tracing.shutdown()],
  ]);
  exitStopped('api', 'stopped', 0, { stop_ms: stop.elapsedMs() });
}

main().catch((err) => {
  log.error('api failed', { error: err });
  process.exit(1);
});

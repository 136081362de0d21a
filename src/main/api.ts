import '../telemetry/instrument'; // first: it patches pg before anything loads it
import { loadSettings, requireDatabaseUrl } from '../config';
import { createApp } from '../app';
import { createDb } from '../db/knex';
import { systemClock } from '../lib/clock';
import { log } from '../lib/log';
import { handoffsForgotten } from '../temporal/handoffs';
import { connectTemporal, requireSearchAttributes } from '../temporal/client';
import { startTracing } from '../telemetry/tracing';
import { requireSecretKeyForLive } from '../webhooks/runtime';
import { registerDbPoolMetrics, startMetricsServer, type MetricsServer } from '../telemetry/metrics';
import { serviceReady } from '../telemetry/readiness';

/** `npm run api`: the HTTP API, stateless; run as many copies as needed. */
async function main(): Promise<void> {
  const settings = loadSettings();
  const tracing = startTracing('svc-api');
  const db = createDb(requireDatabaseUrl(settings), settings.DATABASE_POOL_MAX);
  await requireSecretKeyForLive(settings, db);
  // Filled in as start-up proceeds; /readyz reports what is not there yet.
  const started: { temporal?: Awaited<ReturnType<typeof connectTemporal>> } = {};
  let metrics: MetricsServer | undefined;
  if (settings.METRICS_PORT) {
    registerDbPoolMetrics(db);
    metrics = await startMetricsServer({
      role: 'api',
      host: settings.METRICS_HOST,
      port: settings.METRICS_PORT,
      readiness: () => serviceReady(db, started.temporal?.connection, settings.TEMPORAL_NAMESPACE),
    });
    log.info('api metrics listening', { url: `${metrics.url}/metrics` });
  }
  const temporal = await connectTemporal(settings);
  await requireSearchAttributes(temporal.connection, settings);
  started.temporal = temporal;
  const app = createApp({ db, settings, clock: systemClock, temporal });
  const server = app.listen(settings.PORT, settings.HOST, () => {
    log.info('api listening', {
      url: `http://${settings.HOST}:${settings.PORT}`,
      partner_environment: settings.PARTNER_ENVIRONMENT,
    });
  });
  const stop = () => {
    log.info('api stopping');
    server.close(() => {
      // Delivered handoffs still being deleted: let that finish (the relay would only repeat them).
      void handoffsForgotten(db)
        .then(() =>
          Promise.allSettled([db.destroy(), temporal.connection.close(), metrics?.close(), tracing.shutdown()]),
        )
        .then(() => process.exit(0));
    });
    setTimeout(() => process.exit(0), 5000).unref();
  };
  process.once('SIGINT', stop);
  process.once('SIGTERM', stop);
}

main().catch((err) => {
  log.error('api failed to start', { error: err });
  process.exit(1);
});

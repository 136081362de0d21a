import '../telemetry/instrument'; // first: it patches pg before anything loads it
import { loadSettings, requireDatabaseUrl } from '../config';
import { createApp } from '../app';
import { createDb } from '../db/knex';
import { systemClock } from '../lib/clock';
import { log } from '../lib/log';
import { handoffsForgotten } from '../temporal/handoffs';
import { connectTemporal } from '../temporal/client';
import { startTracing } from '../telemetry/tracing';
import { requireSecretKeyForLive } from '../webhooks/runtime';

/** `npm run api`: the HTTP API, stateless; run as many copies as needed. */
async function main(): Promise<void> {
  const settings = loadSettings();
  const tracing = startTracing('svc-api');
  const db = createDb(requireDatabaseUrl(settings), settings.DATABASE_POOL_MAX);
  await requireSecretKeyForLive(settings, db);
  const temporal = await connectTemporal(settings);
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
        .then(() => Promise.allSettled([db.destroy(), temporal.connection.close(), tracing.shutdown()]))
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

import '../telemetry/instrument'; // first: it patches pg before anything loads it
import { Client } from '@temporalio/client';
import { NativeConnection, type Worker } from '@temporalio/worker';
import { loadSettings, requireDatabaseUrl } from '../config';
import { dbDeadlinesOf, pgConnectionConfig } from '../db/deadlines';
import { createDb } from '../db/knex';
import { systemClock } from '../lib/clock';
import { log } from '../lib/log';
import { startOutboxRelay } from '../messaging/relay';
import { transportsFromSettings } from '../messaging/transports';
import { requireSearchAttributes, temporalConnectionOptions } from '../temporal/client';
import { startHandoffRelay } from '../temporal/handoff-relay';
import { startDispatcher } from '../webhooks/fan-out';
import { listenForQueuedRows } from '../webhooks/queue-announce';
import { requireSecretKeyForLive, webhookRuntime } from '../webhooks/runtime';
import { ensureJanitor } from '../temporal/janitor';
import { temporalClientInterceptors } from '../telemetry/temporal';
import { startTracing } from '../telemetry/tracing';
import { createWorker } from '../worker/create-worker';
import { deploymentVersionOf, releaseTargetOf } from '../temporal/deployment';
import { announceDeploymentVersion, promoteIfFresh } from '../worker/deployment';
import { installSdkLogger } from '../worker/sdk-log';
import { readSdkMetrics, registerDbPoolMetrics, startMetricsServer, type MetricsServer } from '../telemetry/metrics';
import { registerBacklogGauges } from '../telemetry/backlogs';
import { startDependencyProbes, workerReady, type DependencyProbes } from '../telemetry/readiness';
import { runUntilStopped } from '../worker/stop';
import { listenForStop, readyUntilStopped } from './stop';

/**
 * `npm run worker`: runs the workflows and activities; stateless; run as many copies as needed. On
 * SIGTERM or SIGINT it stops gracefully (src/worker/stop.ts) and exits 0.
 */
async function main(): Promise<void> {
  const stop = listenForStop('worker');
  const settings = loadSettings();
  const tracing = startTracing('svc-worker');
  // The SDK's exporter listens on loopback only: the worker's /metrics serves its text with ours.
  const sdkMetrics =
    settings.WORKER_METRICS_PORT && settings.TEMPORAL_SDK_METRICS_PORT
      ? `127.0.0.1:${settings.TEMPORAL_SDK_METRICS_PORT}`
      : undefined;
  installSdkLogger(sdkMetrics);
  const databaseUrl = requireDatabaseUrl(settings);
  const deadlines = dbDeadlinesOf(settings);
  const db = createDb(databaseUrl, settings.DATABASE_POOL_MAX, deadlines);
  await requireSecretKeyForLive(settings, db);
  // Filled in as start-up proceeds; /readyz reports what is not there yet.
  const started: { connection?: NativeConnection; worker?: Worker } = {};
  let metrics: MetricsServer | undefined;
  let probes: DependencyProbes | undefined;
  if (settings.WORKER_METRICS_PORT) {
    registerDbPoolMetrics(db);
    const dependencies = startDependencyProbes({
      db,
      connection: () => started.connection,
      namespace: settings.TEMPORAL_NAMESPACE,
      deadlines: { postgresMs: deadlines.queryMs, temporalMs: settings.TEMPORAL_CALL_TIMEOUT_MS },
      intervalMs: settings.DEPENDENCY_PROBE_INTERVAL_MS,
      temporalRequired: true,
    });
    probes = dependencies;
    registerBacklogGauges(db, Object.keys(transportsFromSettings(settings)) as Array<'sms' | 'email'>);
    metrics = await startMetricsServer({
      role: 'worker',
      host: settings.METRICS_HOST,
      port: settings.WORKER_METRICS_PORT,
      readiness: readyUntilStopped(stop, async () => [...(await dependencies.checks()), workerReady(started.worker)]),
      extra: sdkMetrics ? () => readSdkMetrics(`http://${sdkMetrics}/metrics`) : undefined,
    });
    log.info('worker metrics listening', { url: `${metrics.url}/metrics` });
  }
  const connection = await NativeConnection.connect(temporalConnectionOptions(settings));
  started.connection = connection;
  await requireSearchAttributes(connection, settings);
  // Delivery activities take newly queued webhook rows as the dispatcher commits them.
  const queueNotices = listenForQueuedRows(pgConnectionConfig(databaseUrl, deadlines));
  const version = deploymentVersionOf(settings);
  announceDeploymentVersion(version, settings.TEMPORAL_TASK_QUEUE);
  const worker = await createWorker({
    connection,
    namespace: settings.TEMPORAL_NAMESPACE,
    taskQueue: settings.TEMPORAL_TASK_QUEUE,
    db,
    clock: systemClock,
    publicBaseUrl: settings.PUBLIC_BASE_URL,
    webhooks: webhookRuntime(settings),
    queueNotices,
    stopping: stop.signal,
  });
  started.worker = worker;
  const client = new Client({
    connection,
    namespace: settings.TEMPORAL_NAMESPACE,
    interceptors: temporalClientInterceptors(),
  });
  await ensureJanitor(client, settings.TEMPORAL_TASK_QUEUE);
  // Webhook fan-out after commit: any number of workers may run one (they share the work).
  const dispatcher = startDispatcher({ db, databaseUrl, temporal: client, taskQueue: settings.TEMPORAL_TASK_QUEUE });
  // Workflow handoffs the API did not deliver after its commit (it died, Temporal refused): same sharing.
  const handoffs = startHandoffRelay({
    db,
    temporal: client,
    taskQueue: settings.TEMPORAL_TASK_QUEUE,
    callTimeoutMs: settings.TEMPORAL_CALL_TIMEOUT_MS,
  });
  // Outbox messages (OTP SMS, merchant e-mail) go out only for the kinds with a configured transport.
  const transports = transportsFromSettings(settings);
  const relay = Object.keys(transports).length > 0 ? startOutboxRelay({ db, transports }) : null;
  log.info(relay ? 'outbox relay running' : 'outbox relay off: messages stay in the outbox (ops outbox list)', {
    email: transports.email?.describe ?? 'outbox only (SMTP_URL unset)',
    sms: transports.sms?.describe ?? 'outbox only (SMS_HTTP_URL unset)',
  });
  const running = worker.run(); // resolves once shut down and its in-flight tasks finished
  stop.serving();
  // A brand-new deployment gets this build current; any other waits for `ops release promote`. It
  // may wait up to 30 s for the server to see this build: a stop signal does not wait for it.
  if (version)
    await Promise.race([
      promoteIfFresh(connection, releaseTargetOf(settings), version.buildId, worker.options.identity),
      stop.requested,
    ]);
  log.info('worker running', { task_queue: settings.TEMPORAL_TASK_QUEUE, namespace: settings.TEMPORAL_NAMESPACE });
  // Under `npm start` (an IPC channel): say so, then let the channel go so it cannot keep us alive.
  process.send?.('ready', () => process.disconnect?.());
  await runUntilStopped({
    stop,
    worker,
    running,
    timeoutMs: settings.SHUTDOWN_TIMEOUT_MS,
    loops: [
      ['webhook dispatcher', dispatcher],
      ['handoff relay', handoffs],
      ['outbox relay', relay],
    ],
    closers: [
      ['dependency probes', async () => probes?.stop()],
      ['webhook queue LISTEN', () => queueNotices.stop()],
      ['outbox transports', async () => Object.values(transports).forEach((t) => t.close?.())],
      ['metrics server', metrics?.close],
      ['postgres', () => db.destroy()],
      ['temporal', () => connection.close()],
      ['tracing', () => tracing.shutdown()],
    ],
  });
}

main().catch((err) => {
  log.error('worker failed', { error: err });
  process.exit(1);
});

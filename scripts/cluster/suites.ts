/**
 * The integration suites that use a real Temporal server (a dev server of their own, or the
 * cluster with TEMPORAL_MODE=cluster) rather than the time-skipping test server: what `npm run
 * test:cluster` runs on the cluster. test/unit/cluster-suites.test.ts keeps the list complete.
 */
export const CLUSTER_SUITES = [
  'test/integration/attempt-streams-process.test.ts',
  'test/integration/dependency-probes.test.ts',
  'test/integration/graceful-stop.test.ts',
  'test/integration/release-versioning.test.ts',
  'test/integration/search-attributes-startup.test.ts',
  'test/integration/telemetry-prometheus.test.ts',
] as const;

/**
 * The real-server suites that keep a dev server of their own even with TEMPORAL_MODE=cluster: they
 * need its Web UI (`webUi: true`), which the cluster does not run (docker-compose.yml runs the UI
 * as a container of its own).
 */
export const DEV_SERVER_ONLY_SUITES = ['test/integration/temporal-ui.test.ts'] as const;

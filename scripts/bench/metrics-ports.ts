import { freePort } from '../processes';

/**
 * Free loopback ports for a benchmark's API and worker metrics servers (metrics stay on, as in
 * production, without clashing with `npm start` or another benchmark on the default ports).
 */
export async function benchMetricsPorts(): Promise<Record<string, string>> {
  const [api, worker, sdk] = await Promise.all([freePort(), freePort(), freePort()]);
  return {
    METRICS_HOST: '127.0.0.1',
    METRICS_PORT: String(api),
    WORKER_METRICS_PORT: String(worker),
    TEMPORAL_SDK_METRICS_PORT: String(sdk),
  };
}

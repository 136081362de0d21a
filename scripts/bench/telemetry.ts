import { createServer } from 'node:http';
import type { AddressInfo } from 'node:net';

/**
 * `BENCH_TELEMETRY=compare`: the benchmark also runs the service with telemetry on beside it off,
 * in alternating rounds of the same run. "On" is what production would run: traces exported over
 * OTLP/HTTP, sampled at 10 % of requests (parent-based).
 */
export const compareTelemetry = process.env.BENCH_TELEMETRY === 'compare';

/** The sampling ratio of the "on" side. */
export const SAMPLED = 0.1;

/**
 * A loopback OTLP/HTTP receiver that accepts every export and keeps only counts (a collector's
 * cost is not ours to measure), and the environment that points a service at it.
 */
export async function startOtlpSink() {
  let exports = 0;
  let bytes = 0;
  const server = createServer((req, res) => {
    req.on('data', (chunk: Buffer) => (bytes += chunk.length));
    req.on('end', () => {
      exports += 1;
      res.writeHead(200, { 'content-type': 'application/json' }).end('{}');
    });
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const endpoint = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
  return {
    env: {
      OTEL_EXPORTER_OTLP_ENDPOINT: endpoint,
      OTEL_TRACES_SAMPLER: 'parentbased_traceidratio',
      OTEL_TRACES_SAMPLER_ARG: String(SAMPLED),
    },
    /** What the services sent: export requests and bytes. */
    received: () => ({ exports, bytes }),
    close: () => new Promise<void>((resolve) => server.close(() => resolve())),
  };
}

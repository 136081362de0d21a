import { mkdirSync, mkdtempSync, openSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { launchBrowser } from '../test/e2e/browser';
import { startTsChild } from './bench/services';
import { findSystemBinary } from './system-packages';
import { type Child, freePort, repoRoot, startChild, stopAll, waitFor } from './processes';

/**
 * `npm run screenshot:metrics`: re-takes the Prometheus graphs in docs/screenshots/ from a real
 * run. Starts `bench:journey` (its own Temporal dev server, database, API and worker as child
 * processes, DATABASE_URL's Postgres or an embedded one) with BENCH_FAILING_ENDPOINT=1 and its
 * metrics on two fixed free ports, and a Prometheus of its own scraping them every second
 * (jobs `api` and `worker`, data in a temporary folder, on loopback). After SHOT_TRAFFIC_S seconds
 * of journeys (default 180) it opens Prometheus's graph page in headless Chromium for each key
 * series over that window, saves the PNGs, and stops everything. BENCH_RATE as bench:journey
 * (default here 3 journeys/s).
 */

const TRAFFIC_S = Number(process.env.SHOT_TRAFFIC_S ?? 180);
const OUT = join(repoRoot, 'docs', 'screenshots');

/** The graphs: file name and PromQL. */
const GRAPHS: Array<[string, string]> = [
  ['prometheus-http-rate', 'sum by (route) (rate(svc_http_request_duration_seconds_count{job="api"}[1m]))'],
  [
    'prometheus-http-p95',
    'histogram_quantile(0.95, sum by (le, route) (rate(svc_http_request_duration_seconds_bucket{job="api"}[1m])))',
  ],
  ['prometheus-webhook-outcomes', 'sum by (outcome) (rate(svc_webhook_attempts_total[1m]))'],
  ['prometheus-worker-slots', 'max by (task_queue, worker_type) (max_over_time(temporal_worker_task_slots_used[10s]))'],
];

const log = (line: string) => process.stdout.write(`${line}\n`);
const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

async function main(): Promise<void> {
  const prometheusBin = findSystemBinary('prometheus');
  if (!prometheusBin)
    throw new Error('Prometheus is not installed: apt-get install -y prometheus (or set PROMETHEUS_PATH)');
  const dir = mkdtempSync(join(tmpdir(), 'svc-screenshot-metrics-'));
  let journey: Child | undefined;
  try {
    const [apiMetrics, workerMetrics, promPort] = [await freePort(), await freePort(), await freePort()];
    const config = join(dir, 'prometheus.yml');
    writeFileSync(
      config,
      [
        'global: { scrape_interval: 1s, evaluation_interval: 1s }',
        'scrape_configs:',
        `  - { job_name: api, static_configs: [{ targets: ['127.0.0.1:${apiMetrics}'] }] }`,
        `  - { job_name: worker, static_configs: [{ targets: ['127.0.0.1:${workerMetrics}'] }] }`,
        '',
      ].join('\n'),
    );
    const prometheusUrl = `http://127.0.0.1:${promPort}`;
    const promLog = join(dir, 'prometheus.log');
    const promOut = openSync(promLog, 'a');
    const prometheus = startChild(
      'prometheus',
      prometheusBin,
      [
        `--config.file=${config}`,
        `--web.listen-address=127.0.0.1:${promPort}`,
        `--storage.tsdb.path=${join(dir, 'data')}`,
      ],
      { stdio: ['ignore', promOut, promOut] },
      { logFile: promLog },
    );
    await waitFor('Prometheus', async () => (await fetch(`${prometheusUrl}/-/ready`)).ok, {
      timeoutMs: 60_000,
      watched: [prometheus],
    });

    log(`Prometheus at ${prometheusUrl}; starting bench:journey (its output in ${join(dir, 'journey.log')})...`);
    journey = startTsChild(
      'bench:journey',
      'scripts/bench-journey.ts',
      {
        ...process.env,
        BENCH_RATE: process.env.BENCH_RATE ?? '3',
        // Longer than the window: the journey is stopped once the graphs are taken.
        BENCH_DURATION_S: String(TRAFFIC_S + 600),
        BENCH_FAILING_ENDPOINT: '1',
        BENCH_METRICS_PORT: String(apiMetrics),
        BENCH_WORKER_METRICS_PORT: String(workerMetrics),
      },
      join(dir, 'journey.log'),
    );
    const query = async (expr: string) => {
      const res = await fetch(`${prometheusUrl}/api/v1/query?query=${encodeURIComponent(expr)}`);
      return ((await res.json()) as { data: { result: unknown[] } }).data.result;
    };
    await waitFor(
      'the first session created',
      async () => (await query('sum(svc_checkout_sessions_created_total) > 0')).length > 0,
      { timeoutMs: 300_000, watched: [prometheus, journey], intervalMs: 1000 },
    );
    log(`Traffic flows; taking the graphs in ${TRAFFIC_S} s...`);
    await sleep(TRAFFIC_S * 1000);

    mkdirSync(OUT, { recursive: true });
    const browser = await launchBrowser();
    try {
      const page = await browser.newPage({ viewport: { width: 1280, height: 900 } });
      for (const [name, expr] of GRAPHS) {
        const params = new URLSearchParams({ 'g0.expr': expr, 'g0.tab': '0', 'g0.range_input': `${TRAFFIC_S}s` });
        await page.goto(`${prometheusUrl}/graph?${params.toString()}`);
        // A flat line at 0 has an empty box, which Playwright calls hidden: wait for it to exist.
        await page.locator('.graph svg path').first().waitFor({ state: 'attached', timeout: 30_000 });
        await sleep(500);
        await page.screenshot({ path: join(OUT, `${name}.png`), fullPage: true });
        log(`docs/screenshots/${name}.png: ${expr}`);
      }
    } finally {
      await browser.close();
    }
  } finally {
    // bench:journey removes its database, Temporal server, API and worker on SIGINT (not SIGTERM).
    journey?.signal('SIGINT');
    await journey?.exited;
    await stopAll();
    rmSync(dir, { recursive: true, force: true });
  }
}

main().catch((err) => {
  process.stderr.write(`${err instanceof Error ? err.stack : String(err)}\n`);
  process.exit(1);
});

import { closeSync, openSync, readFileSync, writeFileSync } from 'node:fs';
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import { join } from 'node:path';
import { parse } from 'yaml';
import { type Child, freePort, repoRoot, startChild, waitFor } from '../processes';
import { findSystemBinary } from '../system-packages';

/** The rules the suite evaluates: the repository's own file, as shipped. */
export const ALERTS_FILE = join(repoRoot, 'ops', 'prometheus', 'alerts.yml');
/** Scrape and rule evaluation interval of the suite's Prometheus. */
export const INTERVAL_S = 2;

/**
 * An alert rule of ALERTS_FILE: its name, `for` in seconds, severity, and how long its condition
 * must hold before it fires (`holdS`): its `for` plus how long its condition takes to become true
 * (`conditionDelayS`).
 */
export interface AlertRule {
  name: string;
  forS: number;
  holdS: number;
  /** How long its expression can stay true after the fault ended: its longest range (`increase(x[2m])`: 120). */
  lingerS: number;
  severity: string;
}

/** The longest range selector `[N]` of a PromQL expression, in seconds (0 without one). */
export function longestRangeS(expr: string): number {
  let longest = 0;
  for (const [, range] of expr.matchAll(/\[([0-9a-z]+)\]/g)) longest = Math.max(longest, durationSeconds(range));
  return longest;
}

/**
 * How long after a fault begins a PromQL condition can first be true, in seconds: the longest
 * `*_over_time(…[N])` window (`max_over_time(up[20s]) == 0` holds only once 20 s passed without a
 * success), or the threshold N of a gauge of seconds elapsed (`…_unreachable_seconds > N`); 0 else.
 */
export function conditionDelayS(expr: string): number {
  let longest = 0;
  for (const [, window] of expr.matchAll(/_over_time\([^[]*\[([0-9a-z]+)\]/g))
    longest = Math.max(longest, durationSeconds(window));
  for (const [, threshold] of expr.matchAll(/_unreachable_seconds(?:\{[^}]*\})?\s*>=?\s*(\d+)/g))
    longest = Math.max(longest, Number(threshold));
  return longest;
}

/** `1m30s`, `3m`, `45s`, `6h` → seconds. */
export function durationSeconds(text: string | undefined): number {
  if (!text) return 0;
  let total = 0;
  for (const [, n, unit] of text.matchAll(/(\d+)(ms|s|m|h|d)/g))
    total += Number(n) * { ms: 0.001, s: 1, m: 60, h: 3600, d: 86400 }[unit as 'ms' | 's' | 'm' | 'h' | 'd'];
  return total;
}

/** Every alert rule of `file` (read once at the start: the suite never rewrites it). */
export function readAlertRules(file = ALERTS_FILE): Map<string, AlertRule> {
  const doc = parse(readFileSync(file, 'utf8')) as {
    groups: Array<{ rules: Array<{ alert?: string; expr?: string; for?: string; labels?: Record<string, string> }> }>;
  };
  const rules = new Map<string, AlertRule>();
  for (const group of doc.groups)
    for (const rule of group.rules)
      if (rule.alert)
        rules.set(rule.alert, {
          name: rule.alert,
          forS: durationSeconds(rule.for),
          holdS: durationSeconds(rule.for) + conditionDelayS(rule.expr ?? ''),
          lingerS: longestRangeS(rule.expr ?? ''),
          severity: rule.labels?.severity ?? '',
        });
  return rules;
}

/** One notification the Alertmanager webhook delivered, per alert. */
export interface Notification {
  name: string;
  status: 'firing' | 'resolved';
  severity: string;
  labels: Record<string, string>;
  /** When the receiver got it (wall clock, ms). */
  receivedAt: number;
  /** Prometheus's own times: when it fired, when it resolved. */
  startsAt: number;
  endsAt: number;
}

/** The suite's Alertmanager webhook receiver: every notification, in order. */
export class AlertReceiver {
  readonly notifications: Notification[] = [];
  private constructor(
    private readonly server: http.Server,
    readonly url: string,
  ) {}

  static async start(): Promise<AlertReceiver> {
    const server = http.createServer();
    await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
    const receiver = new AlertReceiver(server, `http://127.0.0.1:${(server.address() as AddressInfo).port}/alerts`);
    server.on('request', (req: http.IncomingMessage, res: http.ServerResponse) => {
      const chunks: Buffer[] = [];
      req.on('data', (c: Buffer) => chunks.push(c));
      req.on('end', () => {
        receiver.record(Buffer.concat(chunks).toString('utf8'));
        res.writeHead(200).end();
      });
    });
    return receiver;
  }

  /** Records each alert of one webhook body. */
  private record(text: string): void {
    const receivedAt = Date.now();
    try {
      const body = JSON.parse(text) as {
        alerts: Array<{ status: string; labels: Record<string, string>; startsAt: string; endsAt: string }>;
      };
      for (const a of body.alerts)
        this.notifications.push({
          name: a.labels.alertname,
          status: a.status === 'resolved' ? 'resolved' : 'firing',
          severity: a.labels.severity ?? '',
          labels: a.labels,
          receivedAt,
          startsAt: Date.parse(a.startsAt),
          endsAt: Date.parse(a.endsAt),
        });
    } catch {
      // not a webhook body: ignored
    }
  }

  close(): Promise<void> {
    return new Promise((r) => this.server.close(() => r()));
  }
}

/** The suite's own rule, always firing at once: proves the path Prometheus → Alertmanager → receiver before any scenario. */
const WATCHDOG_RULES = `groups:
  - name: chaos-suite
    rules:
      - alert: ChaosSuiteWatchdog
        expr: vector(1)
        labels:
          severity: none
        annotations:
          summary: 'The chaos suite checks that alerts reach its receiver'
`;
export const WATCHDOG = 'ChaosSuiteWatchdog';

/** A real Prometheus (Debian's) and Alertmanager (Debian's prometheus-alertmanager) for the suite. */
export interface Alerting {
  prometheus: Child;
  alertmanager: Child;
  prometheusUrl: string;
  receiver: AlertReceiver;
}

/**
 * Starts both, Prometheus scraping the targets of `targetsFile` (file_sd: a JSON list of groups
 * labelled job=api or job=worker, rewritten when a process restarts on new ports) and evaluating
 * ALERTS_FILE, and waits until the watchdog alert has reached the receiver.
 */
export async function startAlerting(dir: string, targetsFile: string, logDir: string): Promise<Alerting> {
  const receiver = await AlertReceiver.start();
  const [amPort, promPort] = [await freePort(), await freePort()];
  // Every alert is its own group, sent at once and resolved at once.
  const amConfig = join(dir, 'alertmanager.yml');
  writeFileSync(
    amConfig,
    `route:
  receiver: suite
  group_by: ['...']
  group_wait: 1s
  group_interval: 1s
  repeat_interval: 4h
receivers:
  - name: suite
    webhook_configs:
      - url: '${receiver.url}'
        send_resolved: true
`,
  );
  const amLog = join(logDir, 'alertmanager.log');
  let out = openSync(amLog, 'a');
  const alertmanager = startChild(
    'Alertmanager',
    findSystemBinary('prometheus-alertmanager') ?? '/usr/bin/prometheus-alertmanager',
    [
      `--config.file=${amConfig}`,
      `--storage.path=${join(dir, 'alertmanager')}`,
      `--web.listen-address=127.0.0.1:${amPort}`,
      '--cluster.listen-address=',
    ],
    { stdio: ['ignore', out, out] },
    { logFile: amLog },
  );
  closeSync(out);

  const watchdogFile = join(dir, 'chaos-watchdog.yml');
  writeFileSync(watchdogFile, WATCHDOG_RULES);
  const promConfig = join(dir, 'prometheus.yml');
  writeFileSync(
    promConfig,
    `global:
  scrape_interval: ${INTERVAL_S}s
  scrape_timeout: ${INTERVAL_S - 1}s
  evaluation_interval: ${INTERVAL_S}s
rule_files:
  - '${ALERTS_FILE}'
  - '${watchdogFile}'
alerting:
  alertmanagers:
    - static_configs:
        - targets: ['127.0.0.1:${amPort}']
scrape_configs:
  - job_name: svc
    file_sd_configs:
      - files: ['${targetsFile}']
`,
  );
  const promLog = join(logDir, 'prometheus.log');
  out = openSync(promLog, 'a');
  const prometheus = startChild(
    'Prometheus',
    findSystemBinary('prometheus') ?? '/usr/bin/prometheus',
    [
      `--config.file=${promConfig}`,
      `--storage.tsdb.path=${join(dir, 'prometheus')}`,
      `--web.listen-address=127.0.0.1:${promPort}`,
      // A resolved alert is sent at the evaluation that resolves it; a firing one is resent this often.
      '--rules.alert.resend-delay=2s',
    ],
    { stdio: ['ignore', out, out] },
    { logFile: promLog },
  );
  closeSync(out);
  const prometheusUrl = `http://127.0.0.1:${promPort}`;
  const wait = { timeoutMs: 60_000, watched: [prometheus, alertmanager], intervalMs: 500 };
  await waitFor('Alertmanager', async () => (await fetch(`http://127.0.0.1:${amPort}/-/ready`)).ok, wait);
  await waitFor('Prometheus', async () => (await fetch(`${prometheusUrl}/-/ready`)).ok, wait);
  // The whole path, end to end, before anything is measured.
  await waitFor(
    'the watchdog alert at the suite receiver',
    async () => receiver.notifications.some((n) => n.name === WATCHDOG),
    {
      ...wait,
      timeoutMs: 60_000,
    },
  );
  return { prometheus, alertmanager, prometheusUrl, receiver };
}

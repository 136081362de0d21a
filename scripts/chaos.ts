import { mkdtempSync, rmSync } from 'node:fs';
import { cpus, loadavg, tmpdir } from 'node:os';
import { join } from 'node:path';
import { table } from './bench/measure';
import { type Notification, readAlertRules, WATCHDOG, INTERVAL_S, type AlertRule } from './chaos/alerting';
import { type Scenario, SCENARIOS } from './chaos/scenarios';
import { Stack } from './chaos/stack';
import { ensureSystemPackages, SYSTEM_PACKAGES } from './system-packages';
import { Load, type RequestRecord } from './upgrade/load';
import { listEvents } from './upgrade/checks';
import {
  armDeadlines,
  type ArmedDeadline,
  DEADLINE_EVERY_MS,
  deadlineHistory,
  type DeadlineOutcome,
  lateness,
  readDeadlines,
} from './chaos/deadlines';

/**
 * `npm run chaos`: faults beyond crashes (docs/chaos.md), each injected by the suite itself on the
 * production layout under steady load, with a real Prometheus and Alertmanager watching.
 *
 *   npm run chaos                          every scenario
 *   npm run chaos -- --fast                the CI subset
 *   npm run chaos -- --scenario pg-stop,worker-pause
 *   npm run chaos -- --list                the scenarios and what each expects
 *   npm run chaos -- --cluster             the Temporal node faults, on a cluster of the suite's own
 *
 * Per scenario: a baseline, the fault, its healing, a watch until the expected alerts resolved
 * (at most RESOLVE_BUDGET_S), then the load drained and the end state read back. Prints requests,
 * 5xx and unanswered inside and outside the fault window (the window ends GRACE_S after the fault),
 * the recovery time, what was lost and duplicated, stale writes fenced, and each alert's firing
 * and resolving delays. Exits 1 when any invariant fails:
 * - no 5xx or unanswered request outside the window, and none that hung to the client's 30 s deadline;
 * - recovery (the last failed answer after the fault ended) within GRACE_S;
 * - nothing acknowledged lost, no transition twice, every event delivered;
 * - each expected alert in ops/prometheus/alerts.yml (else "alert missing"), fired within its
 *   hold (its `for` and its `*_over_time` window) plus EVAL_SLACK_S of the fault's start and resolved within RESOLVE_BUDGET_S of its end,
 *   unless its `for` is longer than the fault (then the table says so: it cannot fire here);
 * - in a no-page scenario, no alert of severity=page;
 * - in a node fault (`--cluster`), every armed session deadline expired once, and no later after
 *   its expires_at than the worst of the no-fault control (run first, same stack, same load) plus
 *   DEADLINE_EXACT_S, or plus the fault's stated lateness when it fell in the fault's window.
 *
 * Settings: CHAOS_RATE (journeys/s, 3), CHAOS_BASELINE_S (10), CHAOS_GRACE_S (15),
 * CHAOS_RESOLVE_BUDGET_S (120), CHAOS_KEEP=1 keeps the logs.
 */

const RATE = Number(process.env.CHAOS_RATE ?? 3);
const BASELINE_S = Number(process.env.CHAOS_BASELINE_S ?? 10);
const GRACE_S = Number(process.env.CHAOS_GRACE_S ?? 15);
const RESOLVE_BUDGET_S = Number(process.env.CHAOS_RESOLVE_BUDGET_S ?? 120);
/** After the fault: at least this long watched, with load. */
const AFTER_S = 20;
/**
 * Between a fault and its alert's condition: a process's probe interval plus its deadline
 * (DEPENDENCY_PROBE_INTERVAL_MS 5 s, a query deadline of a few seconds on a silent path), then
 * scrapes, evaluations and Alertmanager's grouping between the condition and the receiver.
 */
const EVAL_SLACK_S = 10 + 5 * INTERVAL_S + 10;
/** The load's per-request deadline (Balancer.request's default): an answer that never came. */
const CLIENT_TIMEOUT_MS = 30_000;
const DRAIN_MS = 90_000;
const FENCED = 'svc_claims_fenced_total';
/** Beyond the no-fault control's worst lateness: how late a deadline outside a fault's window may expire. */
const DEADLINE_EXACT_S = Number(process.env.CHAOS_DEADLINE_EXACT_S ?? 3);
/** Before the baseline: time to arm a node fault's deadlines (two requests per session). */
const ARMING_S = 20;
/** Node faults: session deadlines from this long before the fault to this long after its planned end. */
const DEADLINES_BEFORE_S = 6;
const DEADLINES_AFTER_S = 20;
const CLUSTER = process.argv.includes('--cluster');
/** The node faults' control: the same stack and load, no fault; it runs first with --cluster. */
const CONTROL = 'no-fault';

const log = (line: string) => process.stdout.write(`${line}\n`);
const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));
const secs = (ms: number) => `${(ms / 1000).toFixed(1)} s`;

function selected(): Scenario[] {
  const args = process.argv.slice(2);
  // Node faults need the cluster (--cluster); with it, the other scenarios may be named too.
  const available = SCENARIOS.filter((s) => CLUSTER || !s.cluster);
  if (args.includes('--list')) {
    for (const s of SCENARIOS)
      log(
        `${s.id.padEnd(20)} ${s.fast ? 'fast' : s.cluster ? 'node' : '    '} ${s.title}; alerts: ${s.alerts.join(', ') || '-'}` +
          (s.cluster?.why
            ? `; deadlines in its window up to ${s.cluster.deadlineLateS} s later than the control's: ${s.cluster.why}`
            : ''),
      );
    process.exit(0);
  }
  const at = args.indexOf('--scenario');
  if (at >= 0) {
    const ids = (args[at + 1] ?? '').split(',').filter(Boolean);
    const unknown = ids.filter((id) => !available.some((s) => s.id === id));
    if (unknown.length || ids.length === 0)
      throw new Error(
        `--scenario takes ids of: ${available.map((s) => s.id).join(', ')} (unknown: ${unknown})` +
          (CLUSTER ? '' : '; the node faults need --cluster'),
      );
    const chosen = available.filter((s) => ids.includes(s.id));
    // A node fault's deadlines are measured against the control's: it comes first.
    const control = chosen.some((s) => s.cluster) ? SCENARIOS.filter((s) => s.id === CONTROL) : [];
    return [...control, ...chosen.filter((s) => s.id !== CONTROL)];
  }
  if (CLUSTER) return SCENARIOS.filter((s) => s.cluster && (!args.includes('--fast') || s.fast));
  if (args.includes('--fast')) return SCENARIOS.filter((s) => s.fast && !s.cluster);
  return SCENARIOS.filter((s) => !s.cluster);
}

/** What one scenario came to. */
interface Outcome {
  scenario: Scenario;
  requests: number;
  fivexxInside: number;
  fivexxOutside: number;
  unansweredInside: number;
  unansweredOutside: number;
  hung: number;
  recoveryMs: number;
  lost: string[];
  duplicated: string[];
  redelivered: number;
  wrongAnswers: string[];
  fenced: string;
  alerts: string[][];
  /** A node fault's session deadlines: how many, how late the worst inside and outside the fault's window. */
  deadlines?: {
    count: number;
    inside: number;
    worstInsideMs: number;
    worstOutsideMs: number;
    worstMs: number;
    /** The no-fault control's worst, which the limits are counted from (undefined for the control). */
    controlMs?: number;
  };
  /** Failed answers by route and status or error: count, first and last answer relative to the fault's start. */
  failedKinds: string[];
  failures: string[];
}

async function main(): Promise<void> {
  const scenarios = selected();
  ensureSystemPackages(SYSTEM_PACKAGES.filter((p) => p.neededBy.test(join(__dirname, 'chaos.ts'))));
  const rules = readAlertRules();
  const dir = mkdtempSync(join(tmpdir(), 'svc-chaos-'));
  const logDir = join(dir, 'logs');
  const stack = new Stack(dir, logDir, log, CLUSTER ? 'cluster' : 'dev server');
  process.once('SIGINT', () => void stack.close().then(() => process.exit(130)));
  const outcomes: Outcome[] = [];
  try {
    const { mkdirSync } = await import('node:fs');
    mkdirSync(logDir, { recursive: true });
    await stack.start();
    log(`Alerts reach the suite: ${WATCHDOG} arrived through Prometheus and Alertmanager.`);
    for (const scenario of scenarios) {
      await stack.restore();
      await stack.freshAlerting();
      // The node faults' deadlines are held to what the control measured on this stack, this run.
      const control = outcomes.find((o) => o.scenario.id === CONTROL)?.deadlines;
      outcomes.push(await runScenario(stack, scenario, rules, control?.worstMs ?? 0));
    }
  } finally {
    await stack.close();
    if (process.env.CHAOS_KEEP !== '1') rmSync(dir, { recursive: true, force: true });
    else log(`Logs kept in ${logDir}`);
  }
  report(outcomes);
  // Everything the suite started is stopped by now; a handle left open by a library (an idle
  // keep-alive socket of a stopped Alertmanager) must not keep CI waiting.
  process.exit(process.exitCode ?? 0);
}

async function runScenario(
  stack: Stack,
  scenario: Scenario,
  rules: Map<string, AlertRule>,
  controlLatenessMs: number,
): Promise<Outcome> {
  log(`\n=== ${scenario.id}: ${scenario.title}`);
  const fencedBefore = await stack.workerCounters(FENCED);
  const load = new Load(stack.balancer, stack.merchants, stack.sellers, {
    journeysPerSecond: RATE,
    refundShare: 0.3,
    slowShare: 0,
    partnerWritesPerSecond: 1,
  });
  // A node fault: sessions whose deadlines fall before, in and after it, armed before the load.
  let armed: ArmedDeadline[] = [];
  if (scenario.cluster) {
    const plannedStart = Date.now() + (ARMING_S + BASELINE_S) * 1000;
    const at: number[] = [];
    for (
      let t = plannedStart - DEADLINES_BEFORE_S * 1000;
      t <= plannedStart + (scenario.faultS + DEADLINES_AFTER_S) * 1000;
      t += DEADLINE_EVERY_MS
    )
      at.push(t);
    armed = await armDeadlines(stack, at);
    log(`  ${armed.length} session deadlines armed, every ${DEADLINE_EVERY_MS / 1000} s around the fault`);
    await sleep(Math.max(0, plannedStart - BASELINE_S * 1000 - Date.now()));
  }
  const startedAt = Date.now();
  load.start();
  await sleep(BASELINE_S * 1000);
  const faultStart = Date.now();
  log(`  fault on`);
  await scenario.inject(stack);
  await sleep(Math.max(0, faultStart + scenario.faultS * 1000 - Date.now()));
  // An alert may resolve while the heal runs (a process started again is gone from the targets
  // before its successor is up): resolutions count from the heal's start.
  const healStart = Date.now();
  await scenario.heal(stack);
  const faultEnd = Date.now();
  log(`  fault off after ${secs(faultEnd - faultStart)}`);

  // Watched with load until the expected alerts that fired have resolved (or the budget is spent).
  const notes = stack.alerting.receiver.notifications;
  const reachable = scenario.alerts.filter((a) => rules.has(a) && rules.get(a)!.holdS + 10 <= scenario.faultS);
  // An alert over a range (`increase(x[2m]) > 0`) stays true that long after the last error: its
  // budget to resolve is that range plus the evaluation slack, when longer than RESOLVE_BUDGET_S.
  const resolveBudgetS = (name: string) => Math.max(RESOLVE_BUDGET_S, rules.get(name)!.lingerS + EVAL_SLACK_S);
  const resolvedBy = faultEnd + Math.max(RESOLVE_BUDGET_S, ...reachable.map(resolveBudgetS)) * 1000;
  const pendingAlerts = () =>
    reachable.filter((name) => {
      const fired = notes.some((n) => n.name === name && n.status === 'firing' && n.receivedAt >= faultStart);
      const resolved = notes.some((n) => n.name === name && n.status === 'resolved' && n.receivedAt >= healStart);
      return fired && !resolved;
    });
  await sleep(AFTER_S * 1000);
  while (pendingAlerts().length && Date.now() < resolvedBy) await sleep(1000);
  const drained = await load.stop(DRAIN_MS);
  const endedAt = Date.now();
  await stack.restore();
  const end = await checkEndState(stack, load, armed);
  const fencedAfter = await stack.workerCounters(FENCED);
  // Per process: one started again during the scenario counts from 0 (what its predecessor
  // counted after the first reading is not seen).
  const fenced =
    fencedAfter === undefined ? 0 : [...fencedAfter].reduce((sum, [p, n]) => sum + n - (fencedBefore?.get(p) ?? 0), 0);

  // Requests, by when their answer came.
  const graceS = Math.max(GRACE_S, scenario.recoveryS ?? 0);
  const windowEnd = faultEnd + graceS * 1000;
  const answeredAt = (r: RequestRecord) => r.at + r.ms;
  const inside = (r: RequestRecord) => answeredAt(r) >= faultStart && answeredAt(r) <= windowEnd;
  const failed = (r: RequestRecord) => r.status === null || r.status >= 500;
  const is5xx = (r: RequestRecord) => r.status !== null && r.status >= 500;
  const records = load.records;
  const lastFailure = Math.max(faultEnd, ...records.filter(failed).map(answeredAt));
  const outcome: Outcome = {
    scenario,
    requests: records.length,
    fivexxInside: records.filter((r) => is5xx(r) && inside(r)).length,
    fivexxOutside: records.filter((r) => is5xx(r) && !inside(r)).length,
    unansweredInside: records.filter((r) => r.status === null && inside(r)).length,
    unansweredOutside: records.filter((r) => r.status === null && !inside(r)).length,
    hung: records.filter((r) => r.status === null && r.ms >= CLIENT_TIMEOUT_MS - 100).length,
    recoveryMs: lastFailure - faultEnd,
    lost: end.lost,
    duplicated: end.duplicated,
    redelivered: end.redelivered,
    wrongAnswers: load.errors.filter((e) => !/: (5\d\d) |: [A-Z_]+$|no answer within|no backend/.test(e)),
    fenced: fencedAfter === undefined ? `n/a (no worker exports ${FENCED})` : String(fenced),
    alerts: [],
    failedKinds: failedKinds(records.filter(failed), faultStart, answeredAt),
    failures: [],
  };
  const f = outcome.failures;
  if (outcome.fivexxOutside || outcome.unansweredOutside)
    f.push(`${outcome.fivexxOutside} 5xx and ${outcome.unansweredOutside} unanswered outside the fault window`);
  if (outcome.hung) f.push(`${outcome.hung} requests hung to the client's ${CLIENT_TIMEOUT_MS / 1000} s deadline`);
  if (outcome.recoveryMs > graceS * 1000) f.push(`recovery took ${secs(outcome.recoveryMs)} (> ${graceS} s)`);
  if (end.lost.length) f.push(`${end.lost.length} lost`);
  if (end.duplicated.length) f.push(`${end.duplicated.length} duplicated`);
  if (outcome.wrongAnswers.length) f.push(`${outcome.wrongAnswers.length} wrong answers (not 5xx)`);
  if (!drained) f.push('load still in flight after the drain');

  // Session deadlines: each expired, at its expires_at (within the stated lateness in the window).
  if (scenario.cluster && armed.length) {
    const deadlines = await readDeadlines(stack, armed);
    const inWindow = (d: DeadlineOutcome) => d.expiresAt >= faultStart && d.expiresAt <= windowEnd;
    const worst = (ds: DeadlineOutcome[]) => Math.max(0, ...ds.map(lateness));
    const insideDs = deadlines.filter(inWindow);
    const outsideDs = deadlines.filter((d) => !inWindow(d));
    outcome.deadlines = {
      count: deadlines.length,
      inside: insideDs.length,
      worstInsideMs: worst(insideDs),
      worstOutsideMs: worst(outsideDs),
      worstMs: worst(deadlines),
      controlMs: scenario.id === CONTROL ? undefined : controlLatenessMs,
    };
    // The control itself is held only to expiring every session once: its lateness is the machine's.
    const beyond = (d: DeadlineOutcome) => (inWindow(d) ? scenario.cluster!.deadlineLateS : DEADLINE_EXACT_S) * 1000;
    const allowed = (d: DeadlineOutcome) => (scenario.id === CONTROL ? Infinity : controlLatenessMs + beyond(d));
    const late = deadlines.filter((x) => x.expiredAt === null || lateness(x) > allowed(x));
    // The latest ones' workflow histories, to see where the time went.
    for (const d of [...late].sort((a, b) => lateness(b) - lateness(a)).slice(0, 3))
      log(
        `  late ${d.sessionId} (${secs(d.expiresAt - faultStart)} after the fault began): ${await deadlineHistory(stack, d)}`,
      );
    for (const d of late)
      f.push(
        d.expiredAt === null
          ? `session ${d.sessionId} (deadline ${secs(d.expiresAt - faultStart)} after the fault began) did not expire: ${d.status}`
          : `session ${d.sessionId} expired ${secs(lateness(d))} after its deadline (${secs(d.expiresAt - faultStart)} after the fault began; allowed ${secs(allowed(d))})`,
      );
  }

  // The alert of fenced writes: they come when the paused process resumes, so it counts from the heal.
  if (scenario.fencedAlert) {
    const name = scenario.fencedAlert;
    if (!rules.has(name)) f.push(`alert ${name} missing`);
    else if (fenced === 0) f.push(`no write was fenced: the paused process held no claim, so ${name} was not tried`);
    else if (!notes.some((n) => n.name === name && n.status === 'firing' && n.receivedAt >= faultEnd))
      f.push(`${name} did not fire after ${fenced} fenced writes`);
  }

  // Alerts: every one that fired during the scenario, then each expected one's verdict.
  const during = notes.filter((n) => n.name !== WATCHDOG && n.receivedAt >= startedAt && n.receivedAt <= endedAt);
  const firstOf = (name: string, status: Notification['status'], after: number) =>
    notes.find((n) => n.name === name && n.status === status && n.receivedAt >= after);
  for (const name of [...new Set(during.map((n) => n.name))]) {
    const fired = firstOf(name, 'firing', startedAt);
    const resolved = firstOf(name, 'resolved', Math.max(fired?.receivedAt ?? startedAt, healStart));
    outcome.alerts.push([
      name,
      fired?.severity ?? rules.get(name)?.severity ?? '',
      fired ? `+${secs(fired.receivedAt - faultStart)} after the fault began` : 'was firing before',
      resolved ? `+${secs(Math.max(0, resolved.receivedAt - faultEnd))} after it ended` : 'still firing',
      scenario.alerts.includes(name) || scenario.fencedAlert === name ? 'expected' : 'unexpected',
    ]);
    if (scenario.noPage && fired?.severity === 'page') f.push(`paging alert ${name} fired on flapping links`);
  }
  for (const name of scenario.alerts) {
    const rule = rules.get(name);
    if (!rule) {
      outcome.alerts.push([name, '', 'alert missing from ops/prometheus/alerts.yml', '', 'expected']);
      f.push(`alert ${name} missing`);
      continue;
    }
    if (!reachable.includes(name)) {
      if (!during.some((n) => n.name === name))
        outcome.alerts.push([
          name,
          rule.severity,
          `cannot fire here: holds ${rule.holdS} s before firing, the fault lasts ${scenario.faultS} s`,
          '',
          'expected',
        ]);
      continue;
    }
    const fired = firstOf(name, 'firing', faultStart);
    if (!fired || fired.receivedAt > faultStart + (rule.holdS + EVAL_SLACK_S) * 1000) {
      f.push(`${name} did not fire within ${rule.holdS + EVAL_SLACK_S} s of the fault`);
      if (!fired) outcome.alerts.push([name, rule.severity, 'NOT FIRED', '', 'expected']);
    } else if (!firstOf(name, 'resolved', healStart))
      f.push(`${name} did not resolve within ${resolveBudgetS(name)} s`);
  }
  printOutcome(outcome);
  return outcome;
}

/** Failed answers grouped by route and status (or connection error), with when they came relative to `t0`. */
function failedKinds(records: RequestRecord[], t0: number, at: (r: RequestRecord) => number): string[] {
  const kinds = new Map<string, number[]>();
  for (const r of records) {
    const key = `${r.route} → ${r.status ?? r.connectionError}`;
    kinds.set(key, [...(kinds.get(key) ?? []), at(r) - t0]);
  }
  return [...kinds.entries()]
    .sort((a, b) => b[1].length - a[1].length)
    .map(
      ([key, ts]) =>
        `${ts.length}× ${key} (from ${secs(Math.min(...ts))} to ${secs(Math.max(...ts))} after the fault began)`,
    );
}

/** Lost, duplicated and redelivered, for the journeys, refunds and products of one scenario's load. */
async function checkEndState(
  stack: Stack,
  load: Load,
  deadlines: ArmedDeadline[],
): Promise<{ lost: string[]; duplicated: string[]; redelivered: number }> {
  const lost: string[] = [];
  const duplicated: string[] = [];
  const get = async (path: string, key: string) => {
    for (let i = 0; ; i++) {
      const res = await stack.balancer.request('GET', path, { authorization: `Bearer ${key}` });
      if (res.status !== null && res.status < 500) return { status: res.status, body: safeJson(res.text) };
      if (i >= 10) return { status: res.status, body: {} as Record<string, unknown> };
      await sleep(1000);
    }
  };
  // Refunds settle and events are delivered within a minute of the load's end.
  const deadline = Date.now() + 60_000;
  for (const [id, r] of load.refunds) {
    for (;;) {
      const now = await get(`/v1/refunds/${id}`, stack.merchants[r.merchant].secretKey);
      if (now.status === 200 && now.body.status === 'succeeded') break;
      if (Date.now() > deadline) {
        lost.push(`refund ${id}: ${now.status} ${String(now.body.status)}, never succeeded`);
        break;
      }
      await sleep(1000);
    }
  }
  const events = await listEvents(stack.balancer, stack.merchants);
  const mine = new Set([
    ...load.journeys.map((j) => j.sessionId),
    ...load.refunds.keys(),
    ...deadlines.map((d) => d.sessionId),
  ]);
  const ours = events.filter((e) => mine.has(e.objectId));
  const count = new Map<string, number>();
  for (const e of ours) count.set(`${e.type} ${e.objectId}`, (count.get(`${e.type} ${e.objectId}`) ?? 0) + 1);
  for (const [key, n] of count)
    if (n > 1 && /completed|succeeded|refunded|expired/.test(key)) duplicated.push(`${key}: ${n} events`);
  for (const d of deadlines)
    if (!count.has(`checkout.session.expired ${d.sessionId}`)) lost.push(`session ${d.sessionId}: no expiry event`);
  for (const j of load.journeys) {
    const s = await get(`/v1/checkout/sessions/${j.sessionId}`, stack.merchants[j.merchant].secretKey);
    if (s.status === 404) lost.push(`session ${j.sessionId}: acknowledged, now 404`);
    else if (j.state === 'paid') {
      // A refund whose answer never came (or came 5xx) may still have been made: then partially refunded too.
      const expected = j.refunds.length ? ['partially_refunded'] : ['paid', 'partially_refunded'];
      if (s.body.status !== 'completed' || !expected.includes(String(s.body.payment_status)))
        lost.push(`session ${j.sessionId}: paid, now ${String(s.body.status)}/${String(s.body.payment_status)}`);
      if ((count.get(`checkout.session.completed ${j.sessionId}`) ?? 0) === 0)
        lost.push(`session ${j.sessionId}: paid, no completion event`);
    }
  }
  for (const [sku, made] of load.created) {
    const p = await get(`/partner/v1/products/${encodeURIComponent(sku)}`, stack.sellers[made.seller].key);
    if (p.status !== 200 || p.body.id !== made.productId) lost.push(`product ${sku}: ${p.status}`);
  }
  while (Date.now() < deadline && ours.some((e) => !stack.received.has(`${e.merchant} ${e.id}`))) await sleep(500);
  let redelivered = 0;
  for (const e of ours) {
    const n = stack.received.get(`${e.merchant} ${e.id}`) ?? 0;
    if (n === 0) lost.push(`event ${e.id} (${e.type}): never delivered`);
    if (n > 1) redelivered += n - 1;
  }
  return { lost, duplicated, redelivered };
}

function safeJson(text: string): Record<string, unknown> {
  try {
    return JSON.parse(text) as Record<string, unknown>;
  } catch {
    return {};
  }
}

function printOutcome(o: Outcome): void {
  log(
    table([
      [
        'requests',
        '5xx in window',
        '5xx outside',
        'unanswered in',
        'unanswered out',
        'hung',
        'recovery',
        'lost',
        'duplicated',
        'redelivered',
        'stale writes fenced',
      ],
      [
        String(o.requests),
        String(o.fivexxInside),
        String(o.fivexxOutside),
        String(o.unansweredInside),
        String(o.unansweredOutside),
        String(o.hung),
        secs(o.recoveryMs),
        String(o.lost.length),
        String(o.duplicated.length),
        String(o.redelivered),
        o.fenced,
      ],
    ]),
  );
  if (o.deadlines) log(`  deadlines: ${deadlineSummary(o.deadlines)}`);
  for (const k of o.failedKinds.slice(0, 6)) log(`  failed: ${k}`);
  log(o.alerts.length ? table([['alert', 'severity', 'fired', 'resolved', ''], ...o.alerts]) : '  no alert fired');
  for (const x of [...o.lost, ...o.duplicated, ...o.wrongAnswers].slice(0, 8)) log(`  ${x}`);
  log(o.failures.length ? `  ${o.scenario.id}: FAILED: ${o.failures.join('; ')}` : `  ${o.scenario.id}: passed`);
}

/** A node fault's deadlines in a line: how many, and how late the worst inside and outside the fault's window. */
function deadlineSummary(d: NonNullable<Outcome['deadlines']>): string {
  const late = (ms: number) => (Number.isFinite(ms) ? secs(ms) : 'never');
  return (
    `${d.count} session deadlines; the latest expiry ${late(d.worstOutsideMs)} after expires_at outside the fault's ` +
    `window, ${late(d.worstInsideMs)} for the ${d.inside} in it` +
    (d.controlMs === undefined ? ' (the control)' : ` (the control's latest: ${secs(d.controlMs)})`)
  );
}

function report(outcomes: Outcome[]): void {
  log(
    '\n=== Summary (5xx window: the fault plus ' +
      `${GRACE_S} s; machine: ${cpus().length} CPUs, load ${loadavg()[0].toFixed(2)})`,
  );
  log(
    table([
      ['scenario', 'requests', '5xx in/out', 'recovery', 'lost', 'dup', 'fenced', 'alerts fired', 'verdict'],
      ...outcomes.map((o) => [
        o.scenario.id,
        String(o.requests),
        `${o.fivexxInside}/${o.fivexxOutside}`,
        secs(o.recoveryMs),
        String(o.lost.length),
        String(o.duplicated.length),
        o.fenced.startsWith('n/a') ? 'n/a' : o.fenced,
        o.alerts
          .filter((a) => a[2].startsWith('+'))
          .map((a) => a[0])
          .join(', ') || '-',
        o.failures.length ? 'FAILED' : 'passed',
      ]),
    ]),
  );
  for (const o of outcomes.filter((x) => x.deadlines))
    log(`deadlines, ${o.scenario.id}: ${deadlineSummary(o.deadlines!)}`);
  const failed = outcomes.filter((o) => o.failures.length);
  log(
    failed.length
      ? `chaos: FAILED ${failed.length} of ${outcomes.length} scenarios: ${failed.map((o) => `${o.scenario.id} (${o.failures.join('; ')})`).join('; ')}`
      : `chaos: passed ${outcomes.length} scenarios: ${outcomes.map((o) => o.scenario.id).join(', ')}`,
  );
  if (failed.length) process.exitCode = 1;
}

main().catch((err) => {
  process.stderr.write(`${err instanceof Error ? err.stack : String(err)}\n`);
  process.exit(1);
});

import { randomBytes } from 'node:crypto';
import { existsSync, mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { cpus, loadavg, tmpdir } from 'node:os';
import { join } from 'node:path';
import { Client as TemporalClient, Connection } from '@temporalio/client';
import { MIGRATION_TIMEOUTS } from '../src/db/migrator';
import { verify } from '../src/webhooks/verify';
import { startHttpsReceiver, type ReceivedRequest } from '../test/helpers/https-receiver';
import { machineBusy } from './bench/cpu';
import { startBenchEnvironment } from './bench/environment';
import { percentile, table } from './bench/measure';
import { type ListedEvent, listEvents, type LockWait, startLockSampler, workflowTaskFailures } from './upgrade/checks';
import { Balancer, logFindings, runTreeCommand, type ServiceProcess, startService, stopService } from './upgrade/fleet';
import { Load, type LoadMerchant, type LoadSeller, type RequestRecord } from './upgrade/load';
import {
  checkoutRelease,
  fixtureTree,
  previousRelease,
  readReleases,
  type ReleaseTree,
  workingTree,
} from './upgrade/releases';

/**
 * `npm run bench:upgrade`: a release rolled out under load, as docs/operations.md ("Releasing")
 * says, from the previous release to this one, and the figures that say whether anybody noticed.
 *
 * The previous release (the newest line of releases.tsv older than package.json's version, checked
 * out as a git worktree under .data/releases with its own `npm ci`) serves real load on 2 APIs and
 * 2 workers: shoppers' journeys (sessions, attempts on the test gateway, some on the 30-second
 * pending path), partial refunds, Partner bulk writes, and every event delivered to each merchant's
 * HTTPS endpoint (loopback, self-signed). Then, under the same load: the new release's expand
 * migrations, its 2 workers started beside the old ones, `ops release promote`, the APIs replaced
 * one at a time (a client-side balancer health-checks `/readyz`), the old workers stopped by SIGTERM
 * once `ops release status` says their build is drained, the contract migrations, a while on the new
 * release alone, then quiescence and the end-state checks.
 *
 * UPGRADE_PAIR=previous (default): the previous release → the working tree. UPGRADE_PAIR=fixture:
 * the working tree → the working tree plus scripts/upgrade/fixture-release.patch (a workflow patch,
 * an expand and a contract migration), so that the procedure is proven on a release that changes
 * both even when this one changes neither.
 *
 * Prints per phase: requests, 5xx, connection errors, p50 and p99 beside the baseline's; each
 * migration's time and attempts and the longest lock wait; how each old process stopped; workflow
 * task failures in every history; and the end state (every acknowledged session, refund, event,
 * delivery and Partner write exactly once, as expected). BENCH_STRICT=1 exits 1 unless there were
 * 0 HTTP 5xx, 0 connection errors, 0 failed journeys or writes, nothing lost or duplicated, 0
 * workflow task failures, every process stopped with exit 0 and no error line or failed activity
 * attempt in its log, every migration applied with no lock wait past its lock timeout, and p99
 * during the migrations (5 s at least) at most 2× the baseline's. For the fixture pair, also: both
 * its migrations applied, and runs started on the old build took its new patch.
 *
 * Settings: UPGRADE_PAIR, BENCH_BASELINE_S (30), BENCH_SETTLE_S (seconds between steps, 5),
 * BENCH_AFTER_S (15), BENCH_RATE (journeys/s, 2), BENCH_PARTNER_RATE (bulk writes/s, 2),
 * BENCH_MERCHANTS (4, each with a seller), BENCH_LOG_LEVEL (the fleet's, warn), DATABASE_URL (a server to create the run's database on;
 * an embedded Postgres otherwise).
 */

const PAIR = process.env.UPGRADE_PAIR ?? 'previous';
const STRICT = process.env.BENCH_STRICT === '1';
const BASELINE_S = Number(process.env.BENCH_BASELINE_S ?? 30);
const SETTLE_S = Number(process.env.BENCH_SETTLE_S ?? 5);
const AFTER_S = Number(process.env.BENCH_AFTER_S ?? 15);
const RATE = Number(process.env.BENCH_RATE ?? 2);
const PARTNER_RATE = Number(process.env.BENCH_PARTNER_RATE ?? 2);
const MERCHANTS = Number(process.env.BENCH_MERCHANTS ?? 4);
const NAMESPACE = 'default';
const TASK_QUEUE = 'upgrade-main';
/** p99 while migrations run, at most this many times the baseline's. */
const MIGRATION_P99_FACTOR = 2;
/** The shortest window measured as "during the migrations" (a p99 over a second's requests is their maximum). */
const MIGRATION_WINDOW_MS = 5000;
/** A lock wait is sampled every 25 ms: what a wait may exceed the lock timeout by before it counts. */
const LOCK_SAMPLE_SLACK_MS = 100;
/** Long enough for the 30-second pending attempts and a refund after them. */
const DRAIN_MS = 120_000;
const SKUS_PER_SELLER = 5;
/** A baseline busier than this leaves no room for the rollout's own process starts: said beside the figures. */
const BUSY_WARNING = 0.75;

const log = (line: string) => process.stdout.write(`${line}\n`);
const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

/** The two trees of the pair to roll between. */
function releasePair(): { from: ReleaseTree; to: ReleaseTree } {
  const here = workingTree();
  if (PAIR === 'fixture') return { from: here, to: fixtureTree(here, log) };
  if (PAIR !== 'previous') throw new Error(`UPGRADE_PAIR must be previous or fixture, not ${PAIR}`);
  const previous = previousRelease(here.version, readReleases());
  if (!previous) throw new Error(`releases.tsv has no release older than package.json's ${here.version}`);
  return { from: checkoutRelease(previous, log), to: here };
}

/** Whether the tree's API drains on SIGTERM by itself (fails /readyz, keeps serving): releases from 0.2.0 on. */
const drainsItself = (tree: ReleaseTree) => existsSync(join(tree.dir, 'src', 'main', 'stop.ts'));
/** Whether the tree's workers declare a Worker Deployment build (0.1.0's poll unversioned). */
const versioned = (tree: ReleaseTree) => existsSync(join(tree.dir, 'src', 'temporal', 'versioning.ts'));

async function main(): Promise<void> {
  const { from, to } = releasePair();
  log(`Rolling ${from.label} (build ${from.buildId}) → ${to.label} (build ${to.buildId}) under load.`);
  const env = await startBenchEnvironment('upgrade', NAMESPACE, log);
  const logDir = mkdtempSync(join(tmpdir(), 'svc-bench-upgrade-logs-'));
  // As a production balancer is set: out after 2 failed checks in a row (a draining API fails at
  // once and serves 1 s more), and with none healthy, every backend not taken out (fail-open).
  const balancer = new Balancer(200, { unhealthyAfter: 2, failOpen: true });
  try {
    const receiver = await startHttpsReceiver();
    env.onClose(() => receiver.close());
    const common: NodeJS.ProcessEnv = {
      PATH: process.env.PATH,
      HOME: process.env.HOME,
      DATABASE_URL: env.databaseUrl,
      TEMPORAL_ADDRESS: env.temporalAddress,
      TEMPORAL_NAMESPACE: NAMESPACE,
      TEMPORAL_TASK_QUEUE: TASK_QUEUE,
      PUBLIC_BASE_URL: 'https://pay.example.com',
      WEBHOOK_SECRET_KEY: randomBytes(32).toString('hex'),
      WEBHOOK_ALLOWED_HOSTS: '127.0.0.1',
      WEBHOOK_EXTRA_CA_PATH: receiver.caPath,
      CHECKOUT_RATE_LIMIT_PER_SECOND: '1000000',
      PARTNER_BULK_RATE_LIMIT: '1000000',
      TRUST_PROXY: '1',
      SHUTDOWN_DRAIN_MS: '1000',
      LOG_LEVEL: process.env.BENCH_LOG_LEVEL ?? 'warn',
    };
    const command = (tree: ReleaseTree, entry: string, args: string[], app: string) =>
      runTreeCommand(tree, entry, args, { ...common, TEMPORAL_BUILD_ID: tree.buildId, PGAPPNAME: app });

    // The previous release's schema and data, made by its own tools.
    const migrated = await command(from, 'src/main/migrate.ts', [], `migrate-${from.buildId}`);
    if (migrated.code !== 0) throw new Error(`${from.label}'s migrate failed:\n${migrated.stderr}`);
    const demos: Array<{ secret_key: string; publishable_key: string; partner_key: string }> = [];
    for (let i = 0; i < MERCHANTS; i++) {
      const out = await command(from, 'src/cli/main.ts', ['demo', '--json'], `ops-${from.buildId}`);
      if (out.code !== 0) throw new Error(`${from.label}'s ops demo failed:\n${out.stdout}${out.stderr}`);
      demos.push(JSON.parse(out.stdout));
    }

    log(`Starting ${from.label}: 2 workers and 2 APIs (logs in ${logDir})...`);
    const fleet: ServiceProcess[] = [];
    const start = async (role: 'api' | 'worker', letter: string, tree: ReleaseTree) => {
      const service = await startService(role, letter, tree, common, logDir);
      fleet.push(service);
      return service;
    };
    const oldWorkers = await Promise.all([start('worker', 'a', from), start('worker', 'b', from)]);
    const oldApis = await Promise.all([start('api', 'a', from), start('api', 'b', from)]);
    for (const api of oldApis) balancer.add(api);
    balancer.start();

    // Each merchant's endpoint takes every event; each seller gets products to keep writing.
    const secrets: string[] = [];
    const merchants: LoadMerchant[] = [];
    const sellers: LoadSeller[] = [];
    for (const [i, demo] of demos.entries()) {
      const created = await balancer.request(
        'POST',
        '/v1/webhook_endpoints',
        { authorization: `Bearer ${demo.secret_key}`, 'idempotency-key': `upgrade_endpoint_${i}` },
        { url: `https://127.0.0.1:${receiver.port}/m${i}`, events: ['*'], mode: 'test' },
      );
      if (created.status !== 201) throw new Error(`endpoint ${i}: ${created.status} ${created.text}`);
      secrets.push(JSON.parse(created.text).secret);
      merchants.push({ index: i, secretKey: demo.secret_key, publishableKey: demo.publishable_key });
      const skus = Array.from({ length: SKUS_PER_SELLER }, (_, j) => `UPG-${i}-BASE-${j}`);
      const products = await balancer.request(
        'POST',
        '/partner/v1/products/bulk',
        { authorization: `Bearer ${demo.partner_key}`, 'idempotency-key': `upgrade_seed_${i}` },
        { items: skus.map((sku) => ({ external_sku: sku, title: `Upgrade ${sku}`, price_iqd: 1000 })) },
      );
      if (products.status !== 200) throw new Error(`products ${i}: ${products.status} ${products.text}`);
      sellers.push({ index: i, key: demo.partner_key, skus });
    }
    const received = new Map<string, number>();
    let badSignatures = 0;
    receiver.respond = (req: ReceivedRequest) => {
      const index = Number(req.path.slice(2));
      try {
        const event = verify(req.body, req.headers['svc-signature'] as string, secrets[index]);
        const key = `${index} ${event.id}`;
        received.set(key, (received.get(key) ?? 0) + 1);
      } catch {
        badSignatures++;
      }
      return { status: 200 };
    };

    const load = new Load(balancer, merchants, sellers, {
      journeysPerSecond: RATE,
      refundShare: 0.3,
      slowShare: 0.2,
      partnerWritesPerSecond: PARTNER_RATE,
    });
    // Each request belongs to the phase it was sent in, by time: a phase begins at its entry's time.
    const timeline: Phase[] = [];
    const runStarted = Date.now();
    const enter = (name: string, atMs = Date.now()) => {
      timeline.push({ name, atMs });
      load.phase = name;
      log(`[${((atMs - runStarted) / 1000).toFixed(1)} s] ${name} (serving: ${balancer.serving().join(', ')})`);
    };
    const locks = await startLockSampler(env.databaseUrl, () => load.phase);
    env.onClose(() => locks.stop());

    enter('baseline');
    load.start();
    const busy = machineBusy();
    await sleep(BASELINE_S * 1000);
    const baselineBusy = busy.share();
    log(
      `  the machine was ${(baselineBusy * 100).toFixed(0)} % busy (${cpus().length} cores)` +
        (baselineBusy > BUSY_WARNING
          ? `: above ${BUSY_WARNING * 100} %, the rollout's own starts have no room (lower BENCH_RATE)`
          : ''),
    );

    const migrations: Array<{ phase: string; name: string; ms: number; attempts: number }> = [];
    /**
     * Runs one phase's migrations from the new release's tree. The window measured as "during the
     * migrations" opens when the first one starts (the runner's own start, node loading its modules
     * on these two cores, is a phase apart: in production it runs elsewhere) and lasts their run and
     * what queued behind them, 5 s at least.
     */
    const migrate = async (phase: 'expand' | 'contract') => {
      enter(`${phase}: the migration runner starts`);
      load.phase = `${phase} migrations`; // for the lock sampler, from the start
      const out = await command(to, 'src/main/migrate.ts', ['--phase', phase, '--json'], `migrate-${to.buildId}`);
      if (out.code !== 0) throw new Error(`${to.label}'s migrate --phase ${phase} failed:\n${out.stdout}${out.stderr}`);
      const report = JSON.parse(out.stdout) as {
        applied: Array<{ name: string; started_at: string; duration_ms: number; attempts: number }>;
      };
      for (const m of report.applied) migrations.push({ phase, name: m.name, ms: m.duration_ms, attempts: m.attempts });
      log(`  ${report.applied.length} ${phase} migration(s) in ${out.ms} ms (the runner's start included)`);
      if (report.applied.length === 0) return;
      const firstAt = Date.parse(report.applied[0].started_at);
      enter(`${phase} migrations`, firstAt);
      await sleep(Math.max(0, firstAt + MIGRATION_WINDOW_MS - Date.now()));
    };

    // 1. Expand while the previous release serves, and let it serve on the expanded schema.
    await migrate('expand');
    enter('previous release on the expanded schema');
    await sleep(SETTLE_S * 1000);

    // 2. The new workers beside the old ones, then the new build made current.
    enter('new workers started');
    // One at a time, as a rolling deploy of two replicas surges (Kubernetes' default maxSurge, 25 %,
    // rounds up to one): a worker's start takes a core for seconds, and this machine has two.
    const newWorkers: ServiceProcess[] = [];
    for (const letter of ['c', 'd']) {
      const startedAt = Date.now();
      newWorkers.push(await start('worker', letter, to));
      log(`  worker-${letter} ready in ${((Date.now() - startedAt) / 1000).toFixed(1)} s`);
    }
    await sleep(SETTLE_S * 1000);
    enter('promote');
    const promotedAtMs = Date.now();
    const promoted = await command(to, 'src/cli/main.ts', ['release', 'promote', '--json'], `ops-${to.buildId}`);
    if (promoted.code !== 0) throw new Error(`release promote failed:\n${promoted.stdout}${promoted.stderr}`);
    await sleep(SETTLE_S * 1000);

    // 3. The APIs, one at a time: a new one in rotation first, then an old one out.
    for (const [i, old] of oldApis.entries()) {
      enter(`API ${i + 1} of ${oldApis.length} replaced`);
      balancer.add(await start('api', String.fromCharCode(99 + i), to));
      if (!drainsItself(old.tree)) {
        // A release that cannot drain itself is taken out of rotation first, as a deploy would.
        balancer.remove(old);
        await sleep(1000);
      }
      await stopService(old);
      await sleep(SETTLE_S * 1000);
    }

    // 4. The old workers, once the status says their build has nothing left to run.
    enter('old workers drained and stopped');
    const statusDeadline = Date.now() + 300_000;
    let verdict = '';
    for (;;) {
      const status = await command(to, 'src/cli/main.ts', ['release', 'status', '--json'], `ops-${to.buildId}`);
      const build =
        status.code === 0 ? buildOf(JSON.parse(status.stdout), versioned(from) ? from.buildId : null) : null;
      if (build && build.verdict !== verdict) log(`  release status: ${from.label}: ${(verdict = build.verdict)}`);
      if (build?.safe_to_stop) break;
      if (Date.now() > statusDeadline) throw new Error(`build ${from.buildId} never drained:\n${status.stdout}`);
      await sleep(2000);
    }
    await Promise.all(oldWorkers.map((w) => stopService(w)));
    await sleep(SETTLE_S * 1000);

    // 5. Contract once no process of the previous release is left.
    await migrate('contract');
    enter('new release alone');
    await sleep(AFTER_S * 1000);

    enter('quiescence');
    const drained = await load.stop(DRAIN_MS);
    log('Waiting for every event to reach its endpoint...');
    const events = await listEvents(balancer, merchants);
    const deliveredBy = Date.now() + 120_000;
    while (Date.now() < deliveredBy && events.some((e) => !received.has(`${e.merchant} ${e.id}`))) await sleep(500);

    // The end state, read through the new release's API.
    const endState = await checkEndState(balancer, load, events, received, merchants, sellers);
    const temporal = new TemporalClient({
      connection: await Connection.connect({ address: env.temporalAddress }),
      namespace: NAMESPACE,
    });
    const tasks = await workflowTaskFailures(temporal);
    await locks.stop();

    report({
      from,
      to,
      promotedAtMs,
      timeline,
      load,
      drained,
      migrations,
      locks: locks.longest,
      lockWaits: locks.byMigration,
      fleet: [...oldApis, ...oldWorkers, ...newWorkers, ...fleet.filter((s) => s.tree === to && s.role === 'api')],
      tasks,
      endState,
      badSignatures,
    });
    await Promise.all(fleet.filter((s) => s.child.running).map((s) => stopService(s)));
  } finally {
    balancer.close();
    if (process.env.BENCH_KEEP !== '1') rmSync(logDir, { recursive: true, force: true });
    await env.close();
  }
}

/** Build `buildId` (null: the unversioned workers) in `release status --json`, or a drained stand-in when it is not listed. */
function buildOf(status: unknown, buildId: string | null): { verdict: string; safe_to_stop: boolean } {
  const builds = (status as { builds: Array<{ build_id: string | null; verdict: string; safe_to_stop: boolean }> })
    .builds;
  return builds.find((b) => b.build_id === buildId) ?? { verdict: 'not listed: nothing left', safe_to_stop: true };
}

/** The patch ids a tree's workflows declare (workflows/patches.ts). */
function patchIds(tree: ReleaseTree): string[] {
  const text = readFileSync(join(tree.dir, 'workflows', 'patches.ts'), 'utf8');
  return [...text.matchAll(/:\s*'([a-z0-9-]+)'/g)].map((m) => m[1]);
}

/** A phase of the run and when it began (wall clock). */
interface Phase {
  name: string;
  atMs: number;
}

/** The phase of `timeline` that time `atMs` falls in. */
function phaseAt(timeline: readonly Phase[], atMs: number): string {
  let name = timeline[0]?.name ?? '';
  for (const p of timeline) if (p.atMs <= atMs) name = p.name;
  return name;
}

/** What the end state came to: each check's name, how many it looked at, and what was wrong. */
interface Check {
  name: string;
  checked: number;
  wrong: string[];
}

/** Every acknowledged effect, exactly once and as expected, read back through the API. */
async function checkEndState(
  balancer: Balancer,
  load: Load,
  events: ListedEvent[],
  received: Map<string, number>,
  merchants: LoadMerchant[],
  sellers: LoadSeller[],
): Promise<Check[]> {
  const get = async (path: string, key: string) => {
    const res = await balancer.request('GET', path, { authorization: `Bearer ${key}` });
    return { status: res.status, body: res.status === 200 ? JSON.parse(res.text) : res.text };
  };
  const count = <T>(items: T[], key: (t: T) => string) => {
    const counts = new Map<string, number>();
    for (const item of items) counts.set(key(item), (counts.get(key(item)) ?? 0) + 1);
    return counts;
  };
  const byTypeAndObject = count(events, (e) => `${e.type} ${e.objectId}`);

  const sessions: Check = { name: 'sessions paid (completed, one completion event)', checked: 0, wrong: [] };
  for (const j of load.journeys) {
    sessions.checked++;
    const s = await get(`/v1/checkout/sessions/${j.sessionId}`, merchants[j.merchant].secretKey);
    const refunded = j.refunds.length > 0;
    const expected = refunded ? 'partially_refunded' : 'paid';
    if (j.state !== 'paid') sessions.wrong.push(`${j.sessionId}: journey ${j.state}`);
    else if (s.status !== 200 || s.body.status !== 'completed' || s.body.payment_status !== expected)
      sessions.wrong.push(
        `${j.sessionId}: ${s.status} ${s.body.status}/${s.body.payment_status}, expected ${expected}`,
      );
    const completions = byTypeAndObject.get(`checkout.session.completed ${j.sessionId}`) ?? 0;
    if (j.state === 'paid' && completions !== 1)
      sessions.wrong.push(`${j.sessionId}: ${completions} completion events`);
    const failedEvents = byTypeAndObject.get(`payment.attempt.failed ${j.sessionId}`) ?? 0;
    if (failedEvents > 0) sessions.wrong.push(`${j.sessionId}: ${failedEvents} payment.attempt.failed events`);
  }

  const refunds: Check = { name: 'refunds settled (succeeded, one event)', checked: 0, wrong: [] };
  for (const [id, r] of load.refunds) {
    refunds.checked++;
    const now = await get(`/v1/refunds/${id}`, merchants[r.merchant].secretKey);
    if (now.status !== 200 || now.body.status !== 'succeeded')
      refunds.wrong.push(`${id}: ${now.status} ${now.body.status}`);
    const n = byTypeAndObject.get(`refund.succeeded ${id}`) ?? 0;
    if (n !== 1) refunds.wrong.push(`${id}: ${n} refund.succeeded events`);
  }

  const deliveries: Check = { name: 'events delivered to their endpoint exactly once', checked: 0, wrong: [] };
  const listed = new Set(events.map((e) => `${e.merchant} ${e.id}`));
  for (const key of listed) {
    deliveries.checked++;
    const n = received.get(key) ?? 0;
    if (n !== 1) deliveries.wrong.push(`${key}: received ${n} times`);
  }
  for (const [key, n] of received) if (!listed.has(key)) deliveries.wrong.push(`${key}: received ${n}, never listed`);

  const partner: Check = { name: 'Partner writes (last stock and price, products created)', checked: 0, wrong: [] };
  for (const [sku, want] of load.stock) {
    partner.checked++;
    const p = await get(`/partner/v1/products/${encodeURIComponent(sku)}`, sellers[want.seller].key);
    const v = p.status === 200 ? (p.body.variants as Array<{ price: number; stocked_quantity: number }>)[0] : undefined;
    if (!v || v.stocked_quantity !== want.onHand || v.price !== want.price)
      partner.wrong.push(
        `${sku}: ${p.status} ${v?.stocked_quantity}/${v?.price}, expected ${want.onHand}/${want.price}`,
      );
  }
  for (const [sku, want] of load.created) {
    partner.checked++;
    const p = await get(`/partner/v1/products/${encodeURIComponent(sku)}`, sellers[want.seller].key);
    if (p.status !== 200 || p.body.id !== want.productId) partner.wrong.push(`${sku}: ${p.status} ${p.body.id}`);
  }
  return [sessions, refunds, deliveries, partner];
}

interface Report {
  from: ReleaseTree;
  to: ReleaseTree;
  promotedAtMs: number;
  timeline: Phase[];
  load: Load;
  drained: boolean;
  migrations: Array<{ phase: string; name: string; ms: number; attempts: number }>;
  locks: Map<string, LockWait>;
  lockWaits: Map<string, LockWait>;
  fleet: ServiceProcess[];
  tasks: Awaited<ReturnType<typeof workflowTaskFailures>>;
  endState: Check[];
  badSignatures: number;
}

/** Prints the figures and sets the exit code under BENCH_STRICT. */
function report(r: Report): void {
  const failures: string[] = [];
  const ms = (n: number | undefined) => (n === undefined ? '-' : `${n.toFixed(0)} ms`);
  // Each request in the phase it was sent in; the lock sampler's phases are the live ones (a migration's from the runner's start).
  const byPhase = new Map<string, RequestRecord[]>();
  for (const x of r.load.records) {
    const phase = phaseAt(r.timeline, x.at);
    byPhase.set(phase, [...(byPhase.get(phase) ?? []), x]);
  }
  const phases = [...new Set(r.timeline.map((p) => p.name))];
  const latency = (rs: RequestRecord[], p: number) =>
    rs.length
      ? percentile(
          rs.map((x) => x.ms),
          p,
        )
      : undefined;
  const baselineP99 = latency(byPhase.get('baseline') ?? [], 99) ?? 0;
  const rows = [['phase', 'requests', '5xx', 'conn errors', 'resent', 'p50', 'p99', 'p99 / baseline']];
  for (const phase of phases) {
    const rs = byPhase.get(phase) ?? [];
    const p99 = latency(rs, 99);
    rows.push([
      phase,
      String(rs.length),
      String(rs.filter((x) => (x.status ?? 0) >= 500).length),
      String(rs.filter((x) => x.status === null).length),
      String(rs.filter((x) => x.resent).length),
      ms(latency(rs, 50)),
      ms(p99),
      p99 === undefined ? '-' : `${(p99 / baselineP99).toFixed(2)}×`,
    ]);
    if (phase.endsWith(' migrations') && p99 !== undefined && p99 > MIGRATION_P99_FACTOR * baselineP99)
      failures.push(`p99 during ${phase} ${ms(p99)} > ${MIGRATION_P99_FACTOR}× the baseline's ${ms(baselineP99)}`);
  }
  const all = r.load.records;
  const fivexx = all.filter((x) => (x.status ?? 0) >= 500);
  const connection = all.filter((x) => x.status === null);
  if (fivexx.length)
    failures.push(
      `${fivexx.length} HTTP 5xx (${[...new Set(fivexx.map((x) => `${x.route} ${x.status}`))].join(', ')})`,
    );
  if (connection.length)
    failures.push(
      `${connection.length} connection errors (${[...new Set(connection.map((c) => c.connectionError))].join(', ')})`,
    );
  log('');
  log(`${r.from.label} (build ${r.from.buildId}) → ${r.to.label} (build ${r.to.buildId})`);
  log(table(rows));

  log('');
  log(
    table([
      ['migration', 'phase', 'time', 'attempts', 'longest lock wait (its own, or behind it)'],
      ...r.migrations.map((m) => {
        const w = r.lockWaits.get(m.name);
        return [m.name, m.phase, ms(m.ms), String(m.attempts), w ? `${ms(w.ms)} (${w.waiter})` : '0 ms'];
      }),
      ...(r.migrations.length ? [] : [['(none)', '', '', '', '']]),
    ]),
  );
  log('');
  for (const [name, w] of r.lockWaits)
    if (w.ms > MIGRATION_TIMEOUTS.lockMs + LOCK_SAMPLE_SLACK_MS)
      failures.push(`a lock wait of ${ms(w.ms)} by or behind ${name}, past the migrations' lock_timeout`);
  const lockRows = [['phase', 'longest lock wait', 'waiter', 'blocked by', 'statement']];
  for (const [phase, w] of r.locks) lockRows.push([phase, ms(w.ms), w.waiter, w.blockers, w.query.slice(0, 60)]);
  log(lockRows.length > 1 ? table(lockRows) : 'No lock wait seen in any phase.');

  log('');
  const stopRows = [['process', 'stop', 'exit', 'error lines in its log', 'activity attempts failed']];
  for (const s of r.fleet) {
    const { errors, failedActivities } = logFindings(s);
    const exit = s.stopped ? (s.stopped.exit.signal ?? String(s.stopped.exit.code)) : 'running';
    stopRows.push([
      s.name,
      s.stopped ? ms(s.stopped.ms) : '-',
      exit,
      String(errors.length),
      String(failedActivities.length),
    ]);
    if (s.stopped && s.stopped.exit.code !== 0) failures.push(`${s.name} exited ${exit}`);
    if (errors.length) failures.push(`${s.name}: ${errors.length} error lines, first: ${errors[0].slice(0, 300)}`);
    if (failedActivities.length)
      failures.push(
        `${s.name}: ${failedActivities.length} activity attempts failed, first: ${failedActivities[0].slice(0, 600)}`,
      );
  }
  log(table(stopRows));

  log('');
  log(
    `Workflows: ${r.tasks.workflows}, workflow task failures: ${r.tasks.failures.length}, ` +
      `workflow tasks timed out (taken over by another worker): ${r.tasks.timeouts}`,
  );
  for (const f of r.tasks.failures.slice(0, 5)) log(`  ${f.type} ${f.workflowId}: ${f.cause} ${f.message}`);
  if (r.tasks.failures.length) failures.push(`${r.tasks.failures.length} workflow task failures`);
  const added = patchIds(r.to).filter((id) => !patchIds(r.from).includes(id));
  for (const id of added) {
    const starts = r.tasks.marked.get(id) ?? [];
    const moved = starts.filter((t) => t < r.promotedAtMs).length;
    log(
      `Patch ${id} (new in ${r.to.label}): marked by ${starts.length} runs, ${moved} of them started on the old build`,
    );
    if (PAIR === 'fixture' && moved === 0) failures.push(`no run started on the old build took patch ${id}`);
  }
  if (PAIR === 'fixture' && !['expand', 'contract'].every((p) => r.migrations.some((m) => m.phase === p)))
    failures.push('the fixture release applied no expand or no contract migration');

  log('');
  const journeys = r.load.journeys;
  log(
    `Load: ${journeys.length} sessions (${journeys.filter((j) => j.slow).length} on the 30-second path), ` +
      `${r.load.refunds.size} refunds, ${r.load.stock.size} SKUs written, ${r.load.created.size} products created; ` +
      `${r.load.errors.length} failed${r.drained ? '' : ', some still in flight after the drain'}; ` +
      `${r.badSignatures} webhook signatures refused`,
  );
  for (const e of r.load.errors.slice(0, 5)) log(`  ${e}`);
  if (r.load.errors.length) failures.push(`${r.load.errors.length} journeys or writes failed`);
  if (!r.drained) failures.push('load still in flight after the drain');
  if (r.badSignatures) failures.push(`${r.badSignatures} webhook signatures refused`);
  log(
    table([
      ['end state', 'checked', 'wrong'],
      ...r.endState.map((c) => [c.name, String(c.checked), String(c.wrong.length)]),
    ]),
  );
  for (const c of r.endState) {
    for (const w of c.wrong.slice(0, 5)) log(`  ${c.name}: ${w}`);
    if (c.wrong.length) failures.push(`${c.name}: ${c.wrong.length} wrong`);
  }
  log(
    `\nNode ${process.version}, ${cpus().length} CPUs (${cpus()[0]?.model ?? 'unknown'}), load average at the end ` +
      loadavg()
        .map((n) => n.toFixed(2))
        .join(' '),
  );
  const pair = `${r.from.label} → ${r.to.label}`;
  log(
    failures.length
      ? `\nbench:upgrade: FAILED (${pair}): ${failures.join('; ')}`
      : `\nbench:upgrade: passed (${pair}): 0 HTTP 5xx, 0 connection errors, nothing lost or duplicated, ` +
          `0 workflow task failures, every stop exit 0`,
  );
  if (STRICT && failures.length) process.exitCode = 1;
}

main().catch((err) => {
  process.stderr.write(`${err instanceof Error ? err.stack : String(err)}\n`);
  process.exit(1);
});

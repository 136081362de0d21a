import { execFileSync, spawnSync } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { chmodSync, chownSync, mkdirSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { Client as PgClient } from 'pg';
import { verify } from '../../src/webhooks/verify';
import { startHttpsReceiver, type ReceivedRequest } from '../../test/helpers/https-receiver';
import { type OwnCluster, restartClusterProcess, startOwnCluster, stoppedClusterProcesses } from '../cluster/cluster';
import { NAMESPACE_RETENTION } from '../cluster/settings';
import { type EmbeddedPg, startEmbeddedPg } from '../embedded-pg';
import { freePort, repoRoot, scrape, stopAll, sumLines } from '../processes';
import { startTemporalDevServer } from '../temporal-dev-server';
import { findTemporalCli } from '../toolchain';
import { Balancer, isReady, runTreeCommand, type ServiceProcess, startService, stopService } from '../upgrade/fleet';
import type { LoadMerchant, LoadSeller } from '../upgrade/load';
import { type ReleaseTree, workingTree } from '../upgrade/releases';
import { type Alerting, startAlerting } from './alerting';
import { ensureToxiproxy, Partitions, Toxiproxy } from './faults';

export const NAMESPACE = 'default';
const TASK_QUEUE = 'chaos-main';
const MERCHANTS = 3;
const SKUS_PER_SELLER = 4;
/** The small filesystem the run's database lives on (a tablespace on tmpfs), for the out-of-disk scenario. */
const SMALL_DISK_MB = 192;

/** The processes of the production layout, by short name. */
export type ProcessName = 'api-a' | 'api-b' | 'worker-a' | 'worker-b';
export const PROCESSES: readonly ProcessName[] = ['worker-a', 'worker-b', 'api-a', 'api-b'];
/** A process's path to a dependency: a toxiproxy proxy of its own, named `<process>-<dependency>`. */
export type Dependency = 'pg' | 'temporal';

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

/** What the stack runs Temporal on: a dev server, or (`--cluster`) a self-hosted cluster of its own. */
export type TemporalKind = 'dev server' | 'cluster';

/**
 * The production layout on this machine: an embedded Postgres (its database in a tablespace on a
 * small tmpfs), a Temporal dev server (or a cluster of six processes on the same Postgres), 2 workers and 2 APIs of the working tree, each reaching
 * Postgres and Temporal through a toxiproxy proxy of its own (so one process can be cut off alone),
 * a client-side balancer in front of the APIs, an HTTPS endpoint per merchant for webhooks, and a
 * real Prometheus and Alertmanager scraping the processes.
 */
export class Stack {
  readonly services = new Map<ProcessName, ServiceProcess>();
  readonly links = new Map<string, number>();
  /** As a load balancer in production: out after 2 failed checks in a row, fail-open when none is healthy. */
  readonly balancer = new Balancer(500, { unhealthyAfter: 2, failOpen: true });
  readonly merchants: LoadMerchant[] = [];
  readonly sellers: LoadSeller[] = [];
  /** Webhook deliveries received: `<merchant> <event id>` → count. */
  readonly received = new Map<string, number>();
  badSignatures = 0;
  /** How long the merchants' endpoints take to answer (a scenario slows them to keep deliveries in flight). */
  webhookDelayMs = 0;
  pg!: EmbeddedPg;
  /** The cluster, when the stack runs on one. */
  cluster?: OwnCluster;
  alerting!: Alerting;
  toxiproxy!: Toxiproxy;
  readonly partitions = new Partitions();
  /** The database's own URL (not through a proxy), for the suite's checks. */
  databaseUrl = '';
  /** Temporal's frontend, not through a proxy, for the suite's checks. */
  temporalAddress = '';
  /** The tmpfs the database's tablespace lives on. */
  smallDisk = '';
  private pgPort = 0;
  private common: NodeJS.ProcessEnv = {};
  private readonly tree: ReleaseTree = workingTree();
  private targetsFile = '';
  private readonly cleanups: Array<() => Promise<unknown> | unknown> = [];

  constructor(
    private readonly dir: string,
    readonly logDir: string,
    readonly logLine: (line: string) => void,
    readonly temporalKind: TemporalKind = 'dev server',
  ) {}

  async start(): Promise<void> {
    const toxiproxyBinary = ensureToxiproxy(this.logLine);
    this.cleanups.push(() => this.partitions.close());
    this.cleanups.push(() => stopAll());

    this.pgPort = await freePort();
    await this.startPostgres();
    const database = 'svc_chaos';
    await this.createDatabase(database);
    this.databaseUrl = this.pg.url(database);

    const temporal = await this.startTemporal();
    this.temporalAddress = temporal.address;

    this.toxiproxy = await Toxiproxy.start(toxiproxyBinary, this.logDir);
    for (const p of PROCESSES) {
      this.links.set(`${p}-pg`, await this.toxiproxy.proxy(`${p}-pg`, `127.0.0.1:${this.pgPort}`));
      this.links.set(`${p}-temporal`, await this.toxiproxy.proxy(`${p}-temporal`, temporal.address));
    }

    const webhooks = await startHttpsReceiver();
    this.cleanups.push(() => webhooks.close());
    this.common = {
      PATH: process.env.PATH,
      HOME: process.env.HOME,
      TEMPORAL_NAMESPACE: NAMESPACE,
      TEMPORAL_TASK_QUEUE: TASK_QUEUE,
      PUBLIC_BASE_URL: 'https://pay.example.com',
      WEBHOOK_SECRET_KEY: randomBytes(32).toString('hex'),
      WEBHOOK_ALLOWED_HOSTS: '127.0.0.1',
      WEBHOOK_EXTRA_CA_PATH: webhooks.caPath,
      CHECKOUT_RATE_LIMIT_PER_SECOND: '1000000',
      PARTNER_BULK_RATE_LIMIT: '1000000',
      TRUST_PROXY: '1',
      SHUTDOWN_DRAIN_MS: '1000',
      LOG_LEVEL: process.env.CHAOS_LOG_LEVEL ?? 'warn',
    };
    const direct = { ...this.common, DATABASE_URL: this.databaseUrl, TEMPORAL_ADDRESS: temporal.address };
    const migrated = await runTreeCommand(this.tree, 'src/main/migrate.ts', [], direct);
    if (migrated.code !== 0) throw new Error(`migrate failed:\n${migrated.stderr}`);
    const demos: Array<{ secret_key: string; publishable_key: string; partner_key: string }> = [];
    for (let i = 0; i < MERCHANTS; i++) {
      const out = await runTreeCommand(this.tree, 'src/cli/main.ts', ['demo', '--json'], direct);
      if (out.code !== 0) throw new Error(`ops demo failed:\n${out.stdout}${out.stderr}`);
      demos.push(JSON.parse(out.stdout));
    }

    this.logLine(`Starting 2 workers and 2 APIs, each through its own proxies (logs in ${this.logDir})...`);
    await Promise.all(['worker-a', 'worker-b'].map((p) => this.startProcess(p as ProcessName)));
    await Promise.all(['api-a', 'api-b'].map((p) => this.startProcess(p as ProcessName)));
    this.balancer.start();
    this.cleanups.push(() => this.balancer.close());

    this.targetsFile = join(this.dir, 'targets.json');
    this.writeTargets();
    await this.freshAlerting();
    this.cleanups.push(() => this.alerting.receiver.close());

    const secrets: string[] = [];
    for (const [i, demo] of demos.entries()) {
      const created = await this.balancer.request(
        'POST',
        '/v1/webhook_endpoints',
        { authorization: `Bearer ${demo.secret_key}`, 'idempotency-key': `chaos_endpoint_${i}` },
        { url: `https://127.0.0.1:${webhooks.port}/m${i}`, events: ['*'], mode: 'test' },
      );
      if (created.status !== 201) throw new Error(`endpoint ${i}: ${created.status} ${created.text}`);
      secrets.push(JSON.parse(created.text).secret);
      this.merchants.push({ index: i, secretKey: demo.secret_key, publishableKey: demo.publishable_key });
      const skus = Array.from({ length: SKUS_PER_SELLER }, (_, j) => `CHAOS-${i}-BASE-${j}`);
      const products = await this.balancer.request(
        'POST',
        '/partner/v1/products/bulk',
        { authorization: `Bearer ${demo.partner_key}`, 'idempotency-key': `chaos_seed_${i}` },
        { items: skus.map((sku) => ({ external_sku: sku, title: `Chaos ${sku}`, price_iqd: 1000 })) },
      );
      if (products.status !== 200) throw new Error(`products ${i}: ${products.status} ${products.text}`);
      this.sellers.push({ index: i, key: demo.partner_key, skus });
    }
    webhooks.respond = (req: ReceivedRequest) => {
      const index = Number(req.path.slice(2));
      try {
        const event = verify(req.body, req.headers['svc-signature'] as string, secrets[index]);
        const key = `${index} ${event.id}`;
        this.received.set(key, (this.received.get(key) ?? 0) + 1);
      } catch {
        this.badSignatures++;
      }
      return { status: 200, delayMs: this.webhookDelayMs || undefined };
    };
  }

  /** The stack's Temporal: its dev server, or a cluster of its own on the suite's Postgres (stopped at close). */
  private async startTemporal(): Promise<{ address: string }> {
    if (this.temporalKind === 'cluster') {
      this.logLine("Starting a Temporal cluster of the suite's own (six processes) on its Postgres...");
      this.cluster = await startOwnCluster({
        dataDir: join(repoRoot, '.data'),
        databaseUrl: this.pg.url('postgres'),
        databasePrefix: 'temporal',
        namespace: NAMESPACE,
        retention: NAMESPACE_RETENTION,
        temporalCli: findTemporalCli(),
        timeoutMs: 300_000,
        say: (line) => this.logLine(`  ${line}`),
      });
      const cluster = this.cluster;
      this.cleanups.push(() => cluster.close());
      return { address: cluster.state.address };
    }
    const [temporalPort, uiPort] = [await freePort(), await freePort()];
    this.logLine(`Starting Temporal dev server on 127.0.0.1:${temporalPort}...`);
    return startTemporalDevServer({
      cli: findTemporalCli(),
      port: temporalPort,
      uiPort,
      dbFile: join(this.dir, 'temporal.db'),
      namespace: NAMESPACE,
      logFile: join(this.logDir, 'temporal.log'),
      timeoutMs: 120_000,
    });
  }

  /**
   * Prometheus and Alertmanager started anew, with empty storage: each scenario's alerts are its
   * own, not the tail of the previous scenario's rate windows (a 1 h error ratio, a 5 m 503 rate).
   */
  async freshAlerting(): Promise<void> {
    if (this.alerting) {
      await Promise.all([this.alerting.prometheus.stop(), this.alerting.alertmanager.stop()]);
      await this.alerting.receiver.close();
    }
    const dir = join(this.dir, `alerting-${Date.now()}`);
    mkdirSync(dir);
    this.alerting = await startAlerting(dir, this.targetsFile, this.logDir);
  }

  /** Starts the embedded Postgres on the run's port (again, after a stop: same data directory). */
  async startPostgres(): Promise<void> {
    this.pg = await startEmbeddedPg({
      dataDir: join(this.dir, 'pg'),
      port: this.pgPort,
      durable: false,
      timeoutMs: 120_000,
      // A cluster's six processes pool up to 15 connections each, beside the four services'.
      maxConnections: this.temporalKind === 'cluster' ? 300 : undefined,
    });
  }

  /**
   * The run's database, in a tablespace on a tmpfs of SMALL_DISK_MB (mounted here, owned by the
   * account Postgres runs as), so that filling that filesystem leaves Postgres out of disk for
   * this database while its WAL and catalogue stay where they were: the failure a full data
   * volume gives, recoverable by freeing space.
   */
  private async createDatabase(database: string): Promise<void> {
    // Postgres runs as its own account (we are root): it must pass through the run's directory.
    chmodSync(this.dir, 0o711);
    this.smallDisk = join(this.dir, 'small-disk');
    mkdirSync(this.smallDisk, { recursive: true });
    execFileSync('mount', ['-t', 'tmpfs', '-o', `size=${SMALL_DISK_MB}m,mode=0700`, 'tmpfs', this.smallDisk]);
    this.cleanups.push(() => spawnSync('umount', ['-l', this.smallDisk]));
    const uid = Number(execFileSync('id', ['-u', 'postgres'], { encoding: 'utf8' }).trim());
    const gid = Number(execFileSync('id', ['-g', 'postgres'], { encoding: 'utf8' }).trim());
    const tablespaceDir = join(this.smallDisk, 'tablespace');
    mkdirSync(tablespaceDir, { mode: 0o700 });
    chownSync(this.smallDisk, uid, gid);
    chownSync(tablespaceDir, uid, gid);
    const admin = new PgClient({ connectionString: this.pg.url('postgres') });
    await admin.connect();
    try {
      await admin.query(`CREATE TABLESPACE chaos_small LOCATION '${tablespaceDir}'`);
      await admin.query(`CREATE DATABASE ${database} TABLESPACE chaos_small`);
    } finally {
      await admin.end();
    }
  }

  /** Starts (or starts again) one process of the layout, with `extraEnv` on top (a clock offset). */
  async startProcess(name: ProcessName, extraEnv: NodeJS.ProcessEnv = {}): Promise<ServiceProcess> {
    const [role, letter] = name.split('-') as ['api' | 'worker', string];
    const env = {
      ...this.common,
      DATABASE_URL: `postgres://postgres@127.0.0.1:${this.links.get(`${name}-pg`)}/svc_chaos`,
      TEMPORAL_ADDRESS: `127.0.0.1:${this.links.get(`${name}-temporal`)}`,
      ...extraEnv,
    };
    const service = await startService(role, letter, this.tree, env, this.logDir);
    this.services.set(name, service);
    if (role === 'api') this.balancer.add(service);
    if (this.targetsFile) this.writeTargets();
    return service;
  }

  /** Stops one process (SIGTERM) and starts it again with `extraEnv`. */
  async restartProcess(name: ProcessName, extraEnv: NodeJS.ProcessEnv = {}): Promise<void> {
    const old = this.services.get(name);
    if (old) {
      this.balancer.remove(old);
      await stopService(old);
    }
    await this.startProcess(name, extraEnv);
  }

  /** Prometheus's file_sd targets: each process's metrics port, by job. */
  private writeTargets(): void {
    const port = (s: ServiceProcess) => new URL(s.readyUrl).host;
    const groups = (['api', 'worker'] as const).map((job) => ({
      targets: [...this.services.values()].filter((s) => s.role === job && s.child.running).map(port),
      labels: { job },
    }));
    writeFileSync(`${this.targetsFile}.tmp`, JSON.stringify(groups));
    // A rename, so Prometheus never reads half a file.
    execFileSync('mv', [`${this.targetsFile}.tmp`, this.targetsFile]);
  }

  /** The proxy port of a process's path to a dependency. */
  link(name: ProcessName, dependency: Dependency): { proxy: string; port: number } {
    const proxy = `${name}-${dependency}`;
    return { proxy, port: this.links.get(proxy)! };
  }

  /** The layout as it was: no fault left, every process running and ready (restarted if it died). */
  async restore(): Promise<void> {
    this.partitions.healAll();
    await this.toxiproxy.reset();
    if (!this.pg.child.running) await this.startPostgres();
    for (const name of this.cluster ? stoppedClusterProcesses(this.cluster.dir) : []) {
      this.logLine(`  Temporal ${name} was not running; starting it again`);
      await restartClusterProcess(this.cluster!.dir, name, this.pg.url('postgres'));
    }
    for (const name of PROCESSES) {
      const s = this.services.get(name)!;
      s.child.signal('SIGCONT');
      if (!s.child.running) {
        this.logLine(`  ${name} had exited (${s.child.report().split('\n')[0]}); starting it again`);
        this.balancer.remove(s);
        await this.startProcess(name);
      }
    }
    const deadline = Date.now() + 120_000;
    for (const name of PROCESSES)
      while (!(await isReady(this.services.get(name)!)) && Date.now() < deadline) await sleep(500);
  }

  /**
   * Each answering worker's /metrics lines matching `select`, summed (undefined when none
   * matched); a paused or stopped worker is left out.
   */
  private async workerSums(
    select: (line: string) => boolean,
  ): Promise<Array<{ name: ProcessName; process: ServiceProcess; sum: number | undefined }>> {
    const sums = [];
    for (const [name, process] of this.services) {
      if (process.role !== 'worker') continue;
      try {
        const sum = sumLines(await scrape(process.readyUrl.replace(/\/readyz$/, '/metrics'), 3000), select);
        sums.push({ name, process, sum });
      } catch {
        // not answering: read next time
      }
    }
    return sums;
  }

  /** The worker whose /metrics lines matching `select` sum highest (worker-a on a tie or when none answers). */
  async busiestWorker(select: (line: string) => boolean): Promise<ProcessName> {
    let busiest: ProcessName = 'worker-a';
    let most = -1;
    for (const { name, sum = 0 } of await this.workerSums(select)) {
      this.logLine(`  ${name}: ${sum} delivery activities running`);
      if (sum > most) [busiest, most] = [name, sum];
    }
    return busiest;
  }

  /**
   * A counter's value in each running worker process, by process (a worker started again is a new
   * process, counting from 0); undefined when no worker exports it.
   */
  async workerCounters(metric: string): Promise<Map<ServiceProcess, number> | undefined> {
    const exported = (await this.workerSums((line) => line.startsWith(`${metric}{`) || line.startsWith(`${metric} `)))
      .filter((w) => w.sum !== undefined)
      .map((w): [ServiceProcess, number] => [w.process, w.sum!]);
    return exported.length ? new Map(exported) : undefined;
  }

  async close(): Promise<void> {
    for (const step of this.cleanups.reverse()) {
      try {
        await step();
      } catch (err) {
        this.logLine(`cleanup: ${String(err)}`);
      }
    }
  }
}

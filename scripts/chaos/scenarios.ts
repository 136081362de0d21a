import { CLAIM_LEASE_MS } from '../../src/webhooks/queue';
import { killClusterProcess, restartClusterProcess } from '../cluster/cluster';
import { clockOffsetEnv } from './faults';
import { type Dependency, NAMESPACE, type ProcessName, type Stack } from './stack';

/**
 * A fault and what must hold around it. `inject` starts the fault, `heal` ends it; the suite keeps
 * steady load on the APIs throughout and measures around the window between the two.
 */
export interface Scenario {
  id: string;
  title: string;
  /** In the CI subset (`--fast`). */
  fast: boolean;
  /** How long the fault lasts. */
  faultS: number;
  /** Alerts of ops/prometheus/alerts.yml that this fault must fire (and that must resolve after it). */
  alerts: string[];
  /**
   * An alert that a resumed process's fenced writes fire after the heal (ClaimsLapsed). The
   * scenario must fence at least one write, and only the alert's firing is checked (its 5-minute
   * window outlasts the scenario).
   */
  fencedAlert?: string;
  /**
   * The recovery this scenario states, when longer than CHAOS_GRACE_S: 5xx may last that long
   * after the fault ends (and no longer).
   */
  recoveryS?: number;
  /** No alert of severity=page may fire (the flapping links). */
  noPage?: boolean;
  /**
   * A node fault of the Temporal cluster: runs only with `--cluster` (the stack on a cluster of its
   * own), with session deadlines armed across it. `deadlineLateS`: how much later than the no-fault
   * control's latest a deadline that falls in the fault's window may expire (the others:
   * DEADLINE_EXACT_S), and why.
   */
  cluster?: { deadlineLateS: number; why?: string };
  inject(stack: Stack): Promise<void>;
  heal(stack: Stack): Promise<void>;
}

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

/** The worker `worker-pause` stopped. */
let paused: ProcessName = 'worker-a';
/** A worker's activity slots in use on the webhooks task queue: its delivery activities running. */
const WEBHOOK_ACTIVITY_SLOTS = (line: string) =>
  line.startsWith('temporal_worker_task_slots_used{') &&
  line.includes('worker_type="ActivityWorker"') &&
  /task_queue="[^"]*-webhooks"/.test(line);

/** Packets of one process's path to a dependency dropped silently (iptables on its proxy port). */
const partition = (name: ProcessName, dependency: Dependency) => ({
  inject: async (stack: Stack) => stack.partitions.cut(stack.link(name, dependency).port),
  heal: async (stack: Stack) => stack.partitions.heal(stack.link(name, dependency).port),
});

/** The Postgres connections of `appPrefix` (application_name) ended on the server's side. */
async function terminateBackends(stack: Stack, appPrefix: string): Promise<void> {
  const { Client } = await import('pg');
  const admin = new Client({ connectionString: stack.pg.url('postgres') });
  await admin.connect();
  try {
    await admin.query('SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE application_name LIKE $1', [
      `${appPrefix}%`,
    ]);
  } finally {
    await admin.end();
  }
}

/** Fills the small filesystem of the database's tablespace, and frees it again. */
const FILLER = 'filler';
async function fillDisk(stack: Stack): Promise<void> {
  const { open } = await import('node:fs/promises');
  const { join } = await import('node:path');
  const file = await open(join(stack.smallDisk, FILLER), 'w');
  const chunk = Buffer.alloc(1 << 20);
  try {
    for (;;) await file.write(chunk);
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code !== 'ENOSPC') throw err;
  } finally {
    await file.close();
  }
}

/** The flapping links: one API's and one worker's paths to Postgres and Temporal, down 5 s, up 5 s. */
let flapping: NodeJS.Timeout | undefined;
const FLAPPED: Array<[ProcessName, Dependency]> = [
  ['api-a', 'pg'],
  ['api-a', 'temporal'],
  ['worker-a', 'pg'],
  ['worker-a', 'temporal'],
];

/** The cluster process a node fault killed, started again at its heal. */
let killed = '';

/**
 * The process of `service` in the stack's cluster whose /metrics lines give the highest `weigh`:
 * the history node owning the most shards, the matching node with the most of our task queue
 * partitions loaded (the first on a tie or when none answers).
 */
async function heaviestNode(stack: Stack, service: string, weigh: (metrics: string) => number): Promise<string> {
  const nodes = stack.cluster!.state.processes.filter((p) => p.service === service);
  let heaviest = { name: nodes[0].name, weight: -1 };
  for (const p of nodes) {
    const text = await fetch(`http://127.0.0.1:${p.ports.metrics}/metrics`, { signal: AbortSignal.timeout(3000) })
      .then((res) => res.text())
      .catch(() => '');
    const weight = weigh(text);
    stack.logLine(`  ${p.name}: ${weight}`);
    if (weight > heaviest.weight) heaviest = { name: p.name, weight };
  }
  return heaviest.name;
}

/** A history node's shards (`numshards_gauge`). */
const shardsOwned = (metrics: string) => Number(/^numshards_gauge\{[^}]*\} (\d+)/m.exec(metrics)?.[1] ?? 0);
/** A matching node's task queue partitions of our namespace that it loaded (one `task_queue_started` series each). */
const ourPartitions = (metrics: string) =>
  metrics.split('\n').filter((l) => l.startsWith('task_queue_started{') && l.includes(`namespace="${NAMESPACE}"`))
    .length;

/**
 * A process of the stack's Temporal cluster (the one `pick` names) killed with `signal`, and started
 * again on its own config and ports at the heal.
 */
const clusterNode = (pick: (stack: Stack) => Promise<string>, signal: NodeJS.Signals) => ({
  inject: async (stack: Stack) => {
    killed = await pick(stack);
    stack.logLine(`  ${signal} to Temporal ${killed}`);
    await killClusterProcess(stack.cluster!.dir, killed, signal);
  },
  heal: async (stack: Stack) => restartClusterProcess(stack.cluster!.dir, killed, stack.pg.url('postgres')),
});

export const SCENARIOS: readonly Scenario[] = [
  {
    id: 'worker-temporal-cut',
    title: 'a worker cut off from Temporal (packets dropped) for 60 s',
    fast: true,
    faultS: 60,
    alerts: ['TemporalUnreachable'],
    ...partition('worker-a', 'temporal'),
  },
  {
    id: 'api-pg-cut',
    title: 'an API cut off from Postgres (packets dropped) for 30 s',
    fast: true,
    faultS: 30,
    alerts: ['PostgresUnreachable', 'DependencyUnavailable'],
    ...partition('api-a', 'pg'),
  },
  {
    id: 'pg-slow',
    title: 'Postgres 200 ms slower per round trip (toxiproxy latency, every process) for 60 s',
    fast: false,
    faultS: 60,
    alerts: [],
    inject: async (stack) => {
      for (const p of ['api-a', 'api-b', 'worker-a', 'worker-b'] as const)
        await stack.toxiproxy.addToxic(stack.link(p, 'pg').proxy, {
          name: 'slow',
          type: 'latency',
          stream: 'downstream',
          attributes: { latency: 200, jitter: 0 },
        });
    },
    heal: (stack) => stack.toxiproxy.reset(),
  },
  {
    id: 'pg-half-open',
    title: "an API's Postgres connections half-open for 30 s (server side gone, no FIN or RST reaches the API)",
    fast: false,
    faultS: 30,
    alerts: ['PostgresUnreachable'],
    inject: async (stack) => {
      // toxiproxy's timeout toxic with timeout 0 holds every byte and every close of the path;
      // then the server ends those backends: the API keeps sockets whose other end is gone.
      const { proxy } = stack.link('api-a', 'pg');
      for (const stream of ['upstream', 'downstream'] as const)
        await stack.toxiproxy.addToxic(proxy, {
          name: `half-open-${stream}`,
          type: 'timeout',
          stream,
          attributes: { timeout: 0 },
        });
      await terminateBackends(stack, 'api-a');
    },
    heal: (stack) => stack.toxiproxy.reset(),
  },
  {
    id: 'pg-stop',
    title: 'Postgres stopped for 45 s (fast shutdown, then started again)',
    fast: true,
    faultS: 45,
    alerts: ['PostgresUnreachable', 'DependencyUnavailable'],
    inject: (stack) => stack.pg.stop(),
    heal: (stack) => stack.startPostgres(),
  },
  {
    id: 'pg-disk-full',
    title: "Postgres out of disk for 45 s (the database's filesystem filled, then freed)",
    fast: false,
    faultS: 45,
    alerts: ['PostgresDiskFull'],
    inject: fillDisk,
    heal: async (stack) => {
      const { rm } = await import('node:fs/promises');
      const { join } = await import('node:path');
      await rm(join(stack.smallDisk, FILLER), { force: true });
    },
  },
  {
    id: 'worker-pause',
    title: `the busiest worker paused (SIGSTOP) for ${(CLAIM_LEASE_MS + 15_000) / 1000} s, past its claims' lease and activity heartbeats, then resumed`,
    fast: true,
    faultS: (CLAIM_LEASE_MS + 15_000) / 1000,
    alerts: ['ScrapeTargetDown'],
    fencedAlert: 'ClaimsLapsed',
    inject: async (stack) => {
      // Paused while it holds claims: the endpoints answer slowly for a moment, so that deliveries
      // are in flight (claimed rows, running activities), and the worker running the most
      // delivery activities at that moment is the one paused.
      stack.webhookDelayMs = 3000;
      await sleep(4000);
      paused = await stack.busiestWorker(WEBHOOK_ACTIVITY_SLOTS);
      stack.services.get(paused)!.child.signal('SIGSTOP');
      stack.webhookDelayMs = 0;
    },
    heal: async (stack) => stack.services.get(paused)!.child.signal('SIGCONT'),
  },
  {
    id: 'api-temporal-cut',
    title: 'an API cut off from Temporal (packets dropped) for 60 s',
    fast: false,
    faultS: 60,
    // The API's gRPC channel (grpc-js) has no connect deadline: a connection attempt made during the
    // cut waits for the kernel's next SYN retransmission (1, 2, 4, 8, 16 s apart), up to 31 s after
    // the path is back; keepalive (15 s + 5 s) and the 5 s reconnect cap bound the rest.
    recoveryS: 35,
    alerts: ['TemporalUnreachable', 'DependencyUnavailable'],
    ...partition('api-a', 'temporal'),
  },
  {
    id: 'clock-skew',
    // 150 s: ClockSkew's 2 minutes `for` plus its probe and scrape, so that the alert must fire.
    title: "one worker's clock 90 s ahead (libfaketime) for 150 s",
    fast: false,
    faultS: 150,
    alerts: ['ClockSkew'],
    inject: (stack) => stack.restartProcess('worker-b', clockOffsetEnv(90)),
    heal: (stack) => stack.restartProcess('worker-b'),
  },
  {
    id: 'flapping',
    title: "links flapping every 5 s for 60 s (an API's and a worker's paths to Postgres and Temporal)",
    fast: false,
    faultS: 60,
    alerts: [],
    noPage: true,
    inject: async (stack) => {
      let down = false;
      const flip = () => {
        down = !down;
        for (const [p, d] of FLAPPED) {
          const port = stack.link(p, d).port;
          if (down) stack.partitions.cut(port);
          else stack.partitions.heal(port);
        }
      };
      flip();
      flapping = setInterval(flip, 5000);
    },
    heal: async (stack) => {
      clearInterval(flapping);
      for (const [p, d] of FLAPPED) stack.partitions.heal(stack.link(p, d).port);
    },
  },
  {
    id: 'no-fault',
    title: 'no fault for 30 s: the control of the node faults (their deadlines and answers under the same load)',
    fast: false,
    faultS: 30,
    alerts: [],
    cluster: { deadlineLateS: 0 },
    inject: async () => undefined,
    heal: async () => undefined,
  },
  {
    id: 'history-kill',
    title:
      'the Temporal history node owning the most shards SIGKILLed, started again 30 s later (its shards move to the other node and back)',
    fast: false,
    faultS: 30,
    // The restarted node takes its shards back: calls to their workflows fail ("Workflow is busy",
    // or the API's 5 s call deadline) until each shard is acquired again, seconds on a loaded machine.
    recoveryS: 30,
    alerts: [],
    cluster: {
      deadlineLateS: 40,
      why: 'a workflow task in flight when its shard moves is lost and times out (10 s), once as the shards move away and once as they come back, plus the membership noticing the dead node',
    },
    ...clusterNode((stack) => heaviestNode(stack, 'history', shardsOwned), 'SIGKILL'),
  },
  {
    id: 'matching-kill',
    title:
      'the Temporal matching node with the most of our task queue partitions SIGKILLed, started again 30 s later (they move to the other node and back)',
    fast: false,
    faultS: 30,
    alerts: [],
    cluster: {
      deadlineLateS: 20,
      why: 'a task dispatched from a partition of the dead node is lost and times out (10 s), plus the membership noticing it',
    },
    ...clusterNode((stack) => heaviestNode(stack, 'matching', ourPartitions), 'SIGKILL'),
  },
  {
    id: 'frontend-restart',
    title: 'the Temporal frontend restarted (SIGTERM, then started again at once)',
    fast: false,
    faultS: 0,
    alerts: [],
    cluster: {
      deadlineLateS: 10,
      why: 'a workflow task whose completion the stopping frontend refused times out (10 s)',
    },
    ...clusterNode(async () => 'frontend', 'SIGTERM'),
  },
];

import { existsSync, mkdirSync, readdirSync, readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import type { Db } from '../../src/db/knex';

/** Linux clock ticks per second (`getconf CLK_TCK`), the unit of /proc/<pid>/stat times. */
const TICKS_PER_SECOND = 100;

/** A process's parent and its CPU time so far (user + system, all threads), from /proc/<pid>/stat. */
function readStat(pid: number): { ppid: number; ticks: number } | null {
  try {
    const text = readFileSync(`/proc/${pid}/stat`, 'utf8');
    // The command name may hold spaces and parentheses: the fields start after the last ')'.
    const fields = text.slice(text.lastIndexOf(')') + 2).split(' ');
    return { ppid: Number(fields[1]), ticks: Number(fields[11]) + Number(fields[12]) };
  } catch {
    return null; // gone, or not Linux
  }
}

/** Whether the kernel lists each thread's children (`/proc/<pid>/task/<tid>/children`, CONFIG_PROC_CHILDREN). */
const childrenListed = existsSync(`/proc/${process.pid}/task/${process.pid}/children`);

/** The direct children of `pid` (of all its threads), or none when it is gone. */
function childrenOf(pid: number): number[] {
  try {
    return readdirSync(`/proc/${pid}/task`).flatMap((tid) =>
      readFileSync(`/proc/${pid}/task/${tid}/children`, 'utf8').split(' ').filter(Boolean).map(Number),
    );
  } catch {
    return [];
  }
}

/** The processes of the trees rooted at `roots`, walked down from them: a few files, not all of /proc. */
function walkTrees(roots: number[]): Map<number, number> {
  const ticks = new Map<number, number>();
  const pending = [...roots];
  while (pending.length > 0) {
    const pid = pending.pop()!;
    if (ticks.has(pid)) continue;
    const stat = readStat(pid);
    if (!stat) continue;
    ticks.set(pid, stat.ticks);
    pending.push(...childrenOf(pid));
  }
  return ticks;
}

/** The same from one read of every process's stat, for kernels that do not list children. */
function scanTrees(roots: number[]): Map<number, number> {
  const stats = new Map<number, { ppid: number; ticks: number }>();
  for (const name of readdirSync('/proc')) {
    if (!/^\d+$/.test(name)) continue;
    const stat = readStat(Number(name));
    if (stat) stats.set(Number(name), stat);
  }
  const inTree = (pid: number): boolean => {
    for (let p = pid, hops = 0; p > 1 && hops < 64; hops++) {
      if (roots.includes(p)) return true;
      const stat = stats.get(p);
      if (!stat) return false;
      p = stat.ppid;
    }
    return false;
  };
  return new Map([...stats].filter(([pid]) => inTree(pid)).map(([pid, s]) => [pid, s.ticks]));
}

/** CPU ticks of every process in the trees rooted at `roots` (the roots and their descendants), by pid. */
export function treeTicks(roots: number[]): Map<number, number> {
  return childrenListed ? walkTrees(roots) : scanTrees(roots);
}

/**
 * CPU time of a changing set of processes over a run: `sample(pids)` at the start, then every so
 * often (a process that ends between two samples keeps the time of its last one), and
 * `seconds()` is what they spent since their first sample, or since they started when that was later.
 */
export class CpuMeter {
  private readonly first = new Map<number, number>();
  private readonly last = new Map<number, number>();
  private started = false;

  sample(ticks: Map<number, number>): void {
    for (const [pid, t] of ticks) {
      // A process first seen after the first sample started during the run: all its time counts.
      if (!this.first.has(pid)) this.first.set(pid, this.started ? 0 : t);
      this.last.set(pid, t);
    }
    this.started = true;
  }

  seconds(): number {
    let ticks = 0;
    for (const [pid, t] of this.last) ticks += t - this.first.get(pid)!;
    return ticks / TICKS_PER_SECOND;
  }
}

/** Process groups to meter: each name's pids (the roots of its trees) when sampled. */
export type CpuGroups = Record<string, () => Promise<number[]>>;

/**
 * From /proc/stat: the CPU time every process of the machine has spent (user, nice, system, irq,
 * softirq) and what the host took from this machine's virtual CPUs meanwhile (steal).
 */
function machineTicks(): { spent: number; steal: number } {
  try {
    const fields = readFileSync('/proc/stat', 'utf8').split('\n')[0].trim().split(/\s+/).slice(1).map(Number);
    const [user, nice, system, , , irq, softirq, steal] = fields;
    return { spent: user + nice + system + irq + softirq, steal: steal ?? 0 };
  } catch {
    return { spent: 0, steal: 0 }; // not Linux
  }
}

/** What `meterCpu` names the host's share (steal) when it meters the other processes. */
export const STOLEN = 'taken by the host (steal)';

/**
 * Meters the CPU time of each group from now, sampling every second, plus this process's own
 * (`self`, when named) less what the sampling itself cost, so that a bench's figure for the code
 * it runs in-process does not carry its meter, plus (`others`, when named) what every other process
 * of the machine spent meanwhile and what the host took (`STOLEN`, steal: on a shared host the
 * machine was slower by that much), so that a run on a busy machine says so; `stop()` returns
 * seconds per group, in the order given, then self's, then the others' and the host's.
 */
export async function meterCpu(
  groups: CpuGroups,
  self?: string,
  others?: string,
): Promise<{ stop(): Promise<Array<[string, number]>> }> {
  const meters = Object.entries(groups).map(([name, roots]) => ({ name, roots, meter: new CpuMeter() }));
  let samplingMicros = 0;
  const sample = async () => {
    for (const { roots, meter } of meters) {
      const pids = await roots();
      const before = process.cpuUsage();
      meter.sample(treeTicks(pids));
      const spent = process.cpuUsage(before);
      samplingMicros += spent.user + spent.system;
    }
  };
  await sample();
  const timer = setInterval(() => void sample().catch(() => undefined), 1000);
  const before = process.cpuUsage();
  const machineBefore = machineTicks();
  return {
    async stop() {
      clearInterval(timer);
      await sample();
      const after = machineTicks();
      const machine = (after.spent - machineBefore.spent) / TICKS_PER_SECOND;
      const own = process.cpuUsage(before);
      const ownSeconds = (own.user + own.system) / 1e6;
      const split: Array<[string, number]> = meters.map(({ name, meter }) => [name, meter.seconds()]);
      const metered = split.reduce((sum, [, seconds]) => sum + seconds, 0);
      if (self) split.push([self, Math.max(0, ownSeconds - samplingMicros / 1e6)]);
      // This process's own time (its sampling included) is the bench's, not another process's.
      if (others) {
        split.push([others, Math.max(0, machine - metered - ownSeconds)]);
        split.push([STOLEN, (after.steal - machineBefore.steal) / TICKS_PER_SECOND]);
      }
      return split;
    },
  };
}

/** The process ids of the Postgres backends serving `db`'s database (its share of the server's CPU). */
export async function databaseBackends(db: Db): Promise<number[]> {
  const { rows } = await db.raw('SELECT pid FROM pg_stat_activity WHERE datname = current_database()');
  return (rows as Array<{ pid: number }>).map((r) => r.pid);
}

/** The machine's busy and total CPU ticks so far, all cores (null: not Linux). */
function machineTotals(): { busy: number; all: number } | null {
  try {
    const fields = readFileSync('/proc/stat', 'utf8').split('\n')[0].trim().split(/\s+/).slice(1).map(Number);
    const { spent, steal } = machineTicks();
    return { busy: spent + steal, all: fields.slice(0, 8).reduce((a, b) => a + b, 0) };
  } catch {
    return null;
  }
}

/** The share of the machine's CPU time (all cores) spent busy from now: `share()` reads it so far. */
export function machineBusy(): { share(): number } {
  const start = machineTotals();
  return {
    share() {
      const now = machineTotals();
      return start && now && now.all > start.all ? (now.busy - start.busy) / (now.all - start.all) : 0;
    },
  };
}

/**
 * Waits until the machine is quiet, at most `maxMs`: every core at least `idleShare` idle, on
 * average, for `holdMs` in a row (from /proc/stat, sampled every second), so that a phase measured
 * after heavy writes (a preload, VACUUM) is not measured against the kernel writing them back or
 * Postgres's background work. Returns how long it waited and the idle share of the last second.
 */
export async function waitForQuietMachine(
  opts: { idleShare?: number; holdMs?: number; maxMs?: number } = {},
): Promise<{ waitedMs: number; idle: number; quiet: boolean }> {
  const { idleShare = 0.85, holdMs = 5000, maxMs = 120_000 } = opts;
  const started = Date.now();
  let quietSince: number | null = null;
  let idle = 0;
  for (let before = machineTotals(); before;) {
    await new Promise((resolve) => setTimeout(resolve, 1000));
    const now = machineTotals()!;
    idle = now.all > before.all ? 1 - (now.busy - before.busy) / (now.all - before.all) : 1;
    before = now;
    quietSince = idle >= idleShare ? (quietSince ?? Date.now() - 1000) : null;
    if (quietSince !== null && Date.now() - quietSince >= holdMs)
      return { waitedMs: Date.now() - started, idle, quiet: true };
    if (Date.now() - started >= maxMs) return { waitedMs: Date.now() - started, idle, quiet: false };
  }
  return { waitedMs: 0, idle: 1, quiet: true }; // not Linux: nothing to wait for
}

/** Now on the CPU profiles' clock (monotonic, µs): the ends of a window that `cpu-profile.ts` reads. */
export const profileClockUs = () => Number(process.hrtime.bigint() / 1000n);

/** Writes a measured window (`startUs`, `endUs` and what it carried) as `dir/name` for `cpu-profile.ts`. */
export function writeProfileWindow(dir: string, name: string, window: { startUs: number; endUs: number }): void {
  mkdirSync(dir, { recursive: true });
  writeFileSync(join(dir, name), JSON.stringify(window));
}

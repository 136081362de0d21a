import { spawn, type ChildProcess } from 'node:child_process';
import { once } from 'node:events';
import { meterCpu, treeTicks } from '../../scripts/bench/cpu';

describe('bench CPU meter', () => {
  let child: ChildProcess;
  beforeAll(async () => {
    // A child that starts a grandchild, so the tree is two levels deep; "ready" once both run.
    child = spawn('sh', ['-c', 'sleep 30 >/dev/null & echo ready; wait'], { stdio: ['ignore', 'pipe', 'ignore'] });
    await once(child.stdout!, 'data');
  });
  afterAll(() => {
    for (const pid of treeTicks([child.pid!]).keys()) process.kill(pid, 'SIGKILL');
  });

  it('finds a root, its children and their children, and no process outside the tree', () => {
    const pids = [...treeTicks([child.pid!]).keys()];
    expect(pids).toContain(child.pid);
    expect(pids.length).toBe(2); // sh and its sleep
    expect(treeTicks([process.pid]).has(child.pid!)).toBe(true);
    expect(treeTicks([child.pid!]).has(process.pid)).toBe(false);
  });

  it("keeps the sampling's own CPU out of this process's figure", async () => {
    // Roots that never exist (above any pid_max) make every sample cost tens of milliseconds; with
    // nothing else done, this process spent (almost) nothing beyond the sampling.
    const absent = async () => Array.from({ length: 20_000 }, (_, i) => 5_000_000 + i);
    const started = process.cpuUsage();
    const meter = await meterCpu({ absent }, 'self');
    const [, [, self]] = await meter.stop();
    const spent = process.cpuUsage(started);
    expect((spent.user + spent.system) / 1e6).toBeGreaterThan(0.05); // the sampling did cost
    expect(self).toBeLessThan(0.02);
  });
});

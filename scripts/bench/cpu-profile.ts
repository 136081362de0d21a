import { existsSync, readdirSync, readFileSync } from 'node:fs';
import { join } from 'node:path';

/**
 * `tsx scripts/bench/cpu-profile.ts <dir> [top]`: reads the V8 CPU profiles that
 * `BENCH_CPU_PROF_DIR=<dir> BENCH_TELEMETRY=compare npm run bench:webhooks` had each compare round's
 * worker write (every thread: main and workflow threads), keeps only the samples inside the measured
 * burst (window.json, the same monotonic clock), and prints self-time per delivery by package and by
 * function, telemetry on against off, largest difference first.
 *
 * `tsx scripts/bench/cpu-profile.ts --whole <dir> [top]`: the profiles that `BENCH_CPU_PROF_DIR=<dir>`
 * had a bench's worker and API write (`<dir>/<bench>-worker`, `<dir>/<bench>-api`), each process's
 * self time by package and by function, per item of the window in `<dir>/window.json` (or the
 * file named after `top`) when there is one (bench:journey writes its steady load's: per journey;
 * bench:scale `window-empty.json` and `window-loaded.json`: per request), else over the whole profile.
 */

interface ProfileNode {
  id: number;
  callFrame: { functionName: string; url: string; lineNumber: number; columnNumber: number };
}
interface Profile {
  nodes: ProfileNode[];
  startTime: number;
  samples: number[];
  timeDeltas: number[];
}
interface Window {
  startUs: number;
  endUs: number;
  deliveries: number;
  cpuSec: number;
}
/** `--whole`'s window: the items (journeys) it carried, no worker CPU metered. */
type ItemWindow = Pick<Window, 'startUs' | 'endUs'> & { count: number };

/** The package (or our source folder, or a V8 pseudo-frame) a frame belongs to. */
function packageOf(url: string, name: string): string {
  if (!url) return name.startsWith('(') ? name : '(native)';
  const nm = url.lastIndexOf('node_modules/');
  if (nm >= 0) {
    const rest = url.slice(nm + 'node_modules/'.length).split('/');
    return rest[0].startsWith('@') ? `${rest[0]}/${rest[1]}` : rest[0];
  }
  if (url.startsWith('node:')) return 'node:' + url.slice(5).split('/')[0];
  const src = url.match(/\/(src|activities|workflows|scripts)\/(.*)$/);
  if (src) return `${src[1]}/${src[2].split('/')[0]}`;
  return url.includes('workflow-bundle') || url.startsWith('file:///') ? 'workflow bundle' : url;
}

/** Self time (µs) per function key and per package of `profile`'s samples within [startUs, endUs]. */
function selfTimes(profile: Profile, window: Window, byFn: Map<string, number>, byPkg: Map<string, number>): number {
  const nodes = new Map(profile.nodes.map((n) => [n.id, n]));
  let t = profile.startTime;
  let total = 0;
  for (let i = 0; i < profile.samples.length; i++) {
    t += profile.timeDeltas[i];
    const next = profile.timeDeltas[i + 1] ?? 0;
    if (t < window.startUs || t > window.endUs) continue;
    const { callFrame: f } = nodes.get(profile.samples[i])!;
    if (f.functionName === '(idle)') continue;
    const fn = `${f.functionName || '(anonymous)'} ${f.url.replace(/^.*node_modules\//, '')}:${f.lineNumber + 1}`;
    byFn.set(fn, (byFn.get(fn) ?? 0) + next);
    const pkg = packageOf(f.url, f.functionName);
    byPkg.set(pkg, (byPkg.get(pkg) ?? 0) + next);
    total += next;
  }
  return total;
}

/** `--whole`: each process folder's profiles, self time per item of the window (or in all). */
function whole(dir: string, top: number, windowName = 'window.json'): void {
  const windowFile = join(dir, windowName);
  const windowed = existsSync(windowFile);
  const window: ItemWindow = windowed
    ? JSON.parse(readFileSync(windowFile, 'utf8'))
    : { startUs: -Infinity, endUs: Infinity, count: 1 };
  const unit = windowed ? `µs per item (${window.count} in ${windowName})` : 'µs in all';
  for (const proc of readdirSync(dir).filter((f) => !f.endsWith('.json'))) {
    const fn = new Map<string, number>();
    const pkg = new Map<string, number>();
    let sampled = 0;
    for (const file of readdirSync(join(dir, proc)).filter((f) => f.endsWith('.cpuprofile'))) {
      const profile = JSON.parse(readFileSync(join(dir, proc, file), 'utf8')) as Profile;
      sampled += selfTimes(profile, { ...window, deliveries: 0, cpuSec: 0 }, fn, pkg);
    }
    const rows = (m: Map<string, number>) =>
      [...m]
        .sort((a, b) => b[1] - a[1])
        .slice(0, top)
        .map(([k, us]) => `${(us / window.count).toFixed(0).padStart(8)}  ${k}`)
        .join('\n');
    process.stdout.write(`\n${proc}: JS threads sampled ${(sampled / window.count).toFixed(0)} ${unit}\n`);
    process.stdout.write(`By package\n${rows(pkg)}\nBy function\n${rows(fn)}\n`);
  }
}

function main(): void {
  if (process.argv[2] === '--whole') return whole(process.argv[3], Number(process.argv[4] ?? 30), process.argv[5]);
  const [dir, topArg] = process.argv.slice(2);
  const top = Number(topArg ?? 40);
  const sides = {
    off: { fn: new Map<string, number>(), pkg: new Map<string, number>(), deliveries: 0, sampledUs: 0, cpuSec: 0 },
    on: { fn: new Map<string, number>(), pkg: new Map<string, number>(), deliveries: 0, sampledUs: 0, cpuSec: 0 },
  };
  for (const round of readdirSync(dir)) {
    const side = round.split('-')[0] as 'off' | 'on';
    const windowFile = join(dir, round, 'window.json');
    if (!(side in sides) || !existsSync(windowFile)) continue;
    const window = JSON.parse(readFileSync(windowFile, 'utf8')) as Window;
    const s = sides[side];
    s.deliveries += window.deliveries;
    s.cpuSec += window.cpuSec;
    for (const file of readdirSync(join(dir, round)).filter((f) => f.endsWith('.cpuprofile'))) {
      const profile = JSON.parse(readFileSync(join(dir, round, file), 'utf8')) as Profile;
      s.sampledUs += selfTimes(profile, window, s.fn, s.pkg);
    }
  }
  const per = (side: 'off' | 'on', us: number) => us / sides[side].deliveries; // µs per delivery
  const out = (title: string, key: 'fn' | 'pkg') => {
    const keys = new Set([...sides.off[key].keys(), ...sides.on[key].keys()]);
    const rows = [...keys]
      .map((k) => ({ k, off: per('off', sides.off[key].get(k) ?? 0), on: per('on', sides.on[key].get(k) ?? 0) }))
      .sort((a, b) => Math.abs(b.on - b.off) - Math.abs(a.on - a.off))
      .slice(0, top);
    process.stdout.write(`\n${title} (µs of self time per delivery: off, on, on − off)\n`);
    for (const r of rows) {
      const line = `${r.off.toFixed(1).padStart(8)} ${r.on.toFixed(1).padStart(8)} ${(r.on - r.off).toFixed(1).padStart(8)}  ${r.k}`;
      process.stdout.write(`${line}\n`);
    }
  };
  for (const side of ['off', 'on'] as const) {
    const s = sides[side];
    process.stdout.write(
      `${side}: ${s.deliveries} deliveries, worker CPU ${((s.cpuSec * 1e6) / s.deliveries).toFixed(0)} µs/delivery ` +
        `(metered), JS threads sampled ${per(side, s.sampledUs).toFixed(0)} µs/delivery\n`,
    );
  }
  out('By package', 'pkg');
  out('By function', 'fn');
}

main();

import { spawnSync } from 'node:child_process';
import { closeSync, existsSync, mkdirSync, openSync } from 'node:fs';
import { join } from 'node:path';
import { type Child, freePort, repoRoot, startChild, waitFor } from '../processes';
import { findSystemBinary, isExecutable } from '../system-packages';

/**
 * The suite's ways to break things, each on its own processes only: Shopify's toxiproxy in every
 * path to Postgres and Temporal (latency, resets, half-open connections, a proxy switched off),
 * iptables DROP rules on loopback for a silent partition (no RST, no ACK: what a cut cable or a
 * security group does), SIGSTOP/SIGCONT, and libfaketime for a clock offset.
 */

/** Pinned: the newest version the Go module proxy serves (`go list -m -versions github.com/Shopify/toxiproxy/v2`). */
export const TOXIPROXY_VERSION = 'v2.5.0';
const TOXIPROXY_MODULE = 'github.com/Shopify/toxiproxy/v2/cmd/server';

/**
 * toxiproxy's server binary, built once from its Go module into .tools/ (module and build caches
 * there too, so a second run builds nothing).
 */
export function ensureToxiproxy(log: (line: string) => void): string {
  const bin = join(repoRoot, '.tools', `toxiproxy-${TOXIPROXY_VERSION}`);
  const server = join(bin, 'server');
  if (isExecutable(server)) return server;
  const go = findSystemBinary('go') ?? ['/usr/local/go/bin/go', '/usr/lib/go/bin/go'].find(isExecutable);
  if (!go) throw new Error(`npm run chaos builds toxiproxy ${TOXIPROXY_VERSION} with Go, and there is no go on PATH`);
  log(`Building toxiproxy ${TOXIPROXY_VERSION} from its Go module into ${bin} (once)...`);
  const goDir = join(repoRoot, '.tools', 'go');
  const result = spawnSync(go, ['install', `${TOXIPROXY_MODULE}@${TOXIPROXY_VERSION}`], {
    stdio: ['ignore', 'inherit', 'inherit'],
    env: {
      ...process.env,
      GOBIN: bin,
      GOMODCACHE: join(goDir, 'mod'),
      GOCACHE: join(goDir, 'cache'),
      GOFLAGS: '-modcacherw',
      GOTOOLCHAIN: 'local',
    },
  });
  if (result.status !== 0 || !isExecutable(server)) throw new Error(`go install ${TOXIPROXY_MODULE} failed`);
  return server;
}

/** A toxic as toxiproxy's API takes it. */
export interface Toxic {
  name: string;
  type: 'latency' | 'timeout' | 'reset_peer' | 'bandwidth' | 'slow_close' | 'limit_data';
  stream: 'upstream' | 'downstream';
  attributes: Record<string, number>;
}

/** A running toxiproxy server and its HTTP API. */
export class Toxiproxy {
  private constructor(
    readonly child: Child,
    private readonly api: string,
  ) {}

  static async start(binary: string, logDir: string): Promise<Toxiproxy> {
    const port = await freePort();
    const logFile = join(logDir, 'toxiproxy.log');
    const out = openSync(logFile, 'a');
    const child = startChild(
      'toxiproxy',
      binary,
      ['-host', '127.0.0.1', '-port', String(port)],
      { stdio: ['ignore', out, out] },
      { logFile },
    );
    closeSync(out);
    const api = `http://127.0.0.1:${port}`;
    await waitFor('toxiproxy API', async () => (await fetch(`${api}/version`)).ok, {
      timeoutMs: 30_000,
      watched: [child],
    });
    return new Toxiproxy(child, api);
  }

  private async call(method: string, path: string, body?: unknown): Promise<void> {
    const res = await fetch(`${this.api}${path}`, {
      method,
      headers: { 'content-type': 'application/json' },
      body: body === undefined ? undefined : JSON.stringify(body),
      signal: AbortSignal.timeout(5000),
    });
    if (!res.ok) throw new Error(`toxiproxy ${method} ${path}: ${res.status} ${await res.text()}`);
    await res.arrayBuffer();
  }

  /** A proxy from a free loopback port to `upstream` (host:port); returns the port. */
  async proxy(name: string, upstream: string): Promise<number> {
    const port = await freePort();
    await this.call('POST', '/proxies', { name, listen: `127.0.0.1:${port}`, upstream, enabled: true });
    return port;
  }

  /** Switched off, a proxy closes its connections and refuses new ones (connection refused). */
  enable(name: string, enabled: boolean): Promise<void> {
    return this.call('POST', `/proxies/${name}`, { enabled });
  }

  addToxic(proxy: string, toxic: Toxic): Promise<void> {
    return this.call('POST', `/proxies/${proxy}/toxics`, { ...toxic, toxicity: 1 });
  }

  removeToxic(proxy: string, name: string): Promise<void> {
    return this.call('DELETE', `/proxies/${proxy}/toxics/${name}`);
  }

  /** Every proxy enabled and without toxics (between scenarios, and after a failed one). */
  reset(): Promise<void> {
    return this.call('POST', '/reset');
  }
}

/**
 * Silent partitions with iptables: packets to and from a proxy's loopback port are dropped, so the
 * process that connects to it sees neither an answer nor a reset (its established connections hang,
 * new ones time out). All rules live in one chain of this run's own, jumped to from INPUT for `lo`
 * only, and removed as a whole at the end.
 */
export class Partitions {
  private readonly chain = `SVC_CHAOS_${process.pid}`;
  private installed = false;
  private readonly iptables: string;

  constructor() {
    const found = findSystemBinary('iptables') ?? ['/usr/sbin/iptables', '/sbin/iptables'].find(isExecutable);
    if (!found) throw new Error('npm run chaos needs iptables (Debian package iptables)');
    this.iptables = found;
  }

  private run(args: string[], tolerate = false): void {
    const r = spawnSync(this.iptables, ['-w', '5', ...args], { encoding: 'utf8' });
    if (r.status !== 0 && !tolerate) throw new Error(`iptables ${args.join(' ')}: ${r.stderr.trim()}`);
  }

  private install(): void {
    if (this.installed) return;
    this.run(['-N', this.chain]);
    this.run(['-I', 'INPUT', '-i', 'lo', '-j', this.chain]);
    this.installed = true;
  }

  /** Drops every packet to or from loopback port `port` (one process's path to one dependency). */
  cut(port: number): void {
    this.install();
    this.run(['-A', this.chain, '-p', 'tcp', '--dport', String(port), '-j', 'DROP']);
    this.run(['-A', this.chain, '-p', 'tcp', '--sport', String(port), '-j', 'DROP']);
  }

  /** Lets packets of `port` through again. */
  heal(port: number): void {
    this.run(['-D', this.chain, '-p', 'tcp', '--dport', String(port), '-j', 'DROP'], true);
    this.run(['-D', this.chain, '-p', 'tcp', '--sport', String(port), '-j', 'DROP'], true);
  }

  /** Every rule of this run gone. */
  healAll(): void {
    if (this.installed) this.run(['-F', this.chain], true);
  }

  /** The chain and its jump removed. */
  close(): void {
    if (!this.installed) return;
    this.run(['-D', 'INPUT', '-i', 'lo', '-j', this.chain], true);
    this.run(['-F', this.chain], true);
    this.run(['-X', this.chain], true);
    this.installed = false;
  }
}

/** Debian's libfaketime (package libfaketime, pulled in by faketime), the multi-threaded variant that Node needs. */
export function libfaketime(): string {
  const candidates = ['x86_64-linux-gnu', 'aarch64-linux-gnu'].map((arch) =>
    join('/usr/lib', arch, 'faketime', 'libfaketimeMT.so.1'),
  );
  const found = candidates.find((path) => existsSync(path));
  if (!found) throw new Error('npm run chaos needs libfaketime (Debian package faketime)');
  return found;
}

/**
 * Environment that starts a process with its wall clock `seconds` ahead: libfaketime in the
 * preload shifts CLOCK_REALTIME (Date, and the Temporal SDK's core too) and leaves the monotonic
 * clock alone, as a drifting or misconfigured NTP would.
 */
export function clockOffsetEnv(seconds: number): NodeJS.ProcessEnv {
  return {
    LD_PRELOAD: libfaketime(),
    FAKETIME: `${seconds >= 0 ? '+' : ''}${seconds}s`,
    FAKETIME_DONT_FAKE_MONOTONIC: '1',
    FAKETIME_NO_CACHE: '1',
  };
}

/** A directory created if missing. */
export function ensureDir(dir: string): string {
  mkdirSync(dir, { recursive: true });
  return dir;
}

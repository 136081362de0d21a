import { spawn, type ChildProcess, type SpawnOptions } from 'node:child_process';
import { readFileSync } from 'node:fs';
import { createServer } from 'node:net';
import { resolve } from 'node:path';

/** The repository root; every script runs from here. */
export const repoRoot = resolve(__dirname, '..');

/**
 * Node's flags for the services (the API and the worker), wherever they are started: the Dockerfile,
 * docker-compose.yml and package.json's `api` and `worker` say the same (test/integration/startup-checks.test.ts).
 *
 * `--no-memory-reducer`: after some seconds idle, V8's memory reducer runs a full collection that
 * shrinks the heap and sets the old generation's limit just above what is live. The next burst of
 * requests then runs a full mark-compact every few hundred milliseconds until the limit has grown
 * back: bench:scale's loaded phase, after minutes idle during its preload, spent up to twice the
 * API's garbage collection and up to 1.5× its p50 on the same requests (`--trace-gc`: 19
 * mark-compacts at 52–70 MB in that phase, 2 with the flag). A service that is idle at night and
 * busy in the morning would pay the same. The cost: an idle process keeps the heap its last busy
 * period grew (about 200 MB for the API under bench load) instead of giving it back.
 */
export const SERVICE_NODE_FLAGS = ['--no-memory-reducer'] as const;

/** How a child ended: an exit code, a signal, or a spawn error. */
export interface ExitInfo {
  code: number | null;
  signal: NodeJS.Signals | null;
  error?: Error;
}

/** How to stop a child and where to look when it fails. */
export interface ChildControl {
  /** The signal that asks this program to shut down cleanly (default SIGTERM). */
  stopSignal?: NodeJS.Signals;
  /** The signal of last resort (default SIGKILL; Postgres wants SIGQUIT so its backends go too). */
  killSignal?: NodeJS.Signals;
  /** Where the program's output goes, quoted in failure reports. */
  logFile?: string;
  /** How long `stop()` waits after the stop signal before the kill signal (default 20 s). */
  stopGraceMs?: number;
}

const started = new Set<Child>();
let closing = false;
let exitHookInstalled = false;

/** A child process we started, with a promise of its end and an orderly stop. */
export class Child {
  readonly exited: Promise<ExitInfo>;
  private ended: ExitInfo | undefined;

  constructor(
    readonly name: string,
    private readonly proc: ChildProcess,
    private readonly control: ChildControl,
  ) {
    this.exited = new Promise<ExitInfo>((resolveExit) => {
      proc.once('exit', (code, signal) => resolveExit({ code, signal }));
      proc.once('error', (error) => {
        if (proc.pid === undefined) resolveExit({ code: null, signal: null, error });
      });
    }).then((info) => {
      this.ended = info;
      started.delete(this);
      return info;
    });
  }

  get running(): boolean {
    return this.ended === undefined;
  }

  /** The operating system's process id (undefined if it could not be spawned). */
  get pid(): number | undefined {
    return this.proc.pid;
  }

  /** Asks the child to stop, waits up to `graceMs`, then kills it. */
  async stop(graceMs = this.control.stopGraceMs ?? 20_000): Promise<ExitInfo> {
    if (!this.running) return this.exited;
    this.signal(this.control.stopSignal ?? 'SIGTERM');
    const timer = setTimeout(() => {
      process.stderr.write(`${this.name} did not stop within ${graceMs / 1000}s; killing it\n`);
      this.kill();
    }, graceMs);
    const info = await this.exited;
    clearTimeout(timer);
    return info;
  }

  /** Calls `listener` with each IPC message the child sends (spawned with an 'ipc' stdio entry). */
  onMessage(listener: (message: unknown) => void): void {
    this.proc.on('message', listener);
  }

  /** Sends `signal` to the child if it still runs. */
  signal(signal: NodeJS.Signals): void {
    if (this.running && this.proc.pid !== undefined) this.proc.kill(signal);
  }

  /** Ends the child at once (last resort). */
  kill(): void {
    this.signal(this.control.killSignal ?? 'SIGKILL');
  }

  /** One paragraph saying how the child ended, with the tail of its log when it has one. */
  report(): string {
    const info = this.ended;
    const how = !info
      ? 'is still running'
      : info.error
        ? `could not be started: ${info.error.message}`
        : info.signal
          ? `was killed by ${info.signal}`
          : `exited with code ${info.code}`;
    const tail = this.control.logFile ? logTail(this.control.logFile) : '';
    return tail ? `${this.name} ${how}. Last lines of ${this.control.logFile}:\n${tail}` : `${this.name} ${how}.`;
  }
}

/**
 * Starts `command`, tracked so that `stopAll` and an unexpected exit of this script end it too.
 * By default the child gets its own process group: a terminal Ctrl-C then reaches only us, and
 * we stop the children in order.
 */
export function startChild(
  name: string,
  command: string,
  args: string[],
  spawnOptions: SpawnOptions = {},
  control: ChildControl = {},
): Child {
  if (closing) throw new Error(`not starting ${name}: shutting down`);
  if (!exitHookInstalled) {
    exitHookInstalled = true;
    process.once('exit', killAll);
  }
  const child = new Child(name, spawn(command, args, { detached: true, ...spawnOptions }), control);
  started.add(child);
  return child;
}

/** Stops every tracked child, newest first, one after another; no child can be started afterwards. */
export async function stopAll(): Promise<void> {
  closing = true;
  for (const child of [...started].reverse()) await child.stop();
}

/** Safety net when this script exits without stopping its children (a crash): end them at once. */
function killAll(): void {
  for (const child of started) child.kill();
}

/** The last `lines` lines of a log file, or '' when it cannot be read. */
export function logTail(path: string, lines = 15): string {
  try {
    return readFileSync(path, 'utf8').trimEnd().split('\n').slice(-lines).join('\n');
  } catch {
    return '';
  }
}

/** Fails with a clear message when something already listens on `host:port`. */
export async function assertPortFree(port: number, host: string, what: string, hint: string): Promise<void> {
  await new Promise<void>((resolveFree, reject) => {
    const server = createServer();
    server.once('error', (err: NodeJS.ErrnoException) => {
      reject(
        err.code === 'EADDRINUSE' ? new Error(`Port ${port} (${what}) is already in use on ${host}. ${hint}`) : err,
      );
    });
    server.listen(port, host, () => server.close(() => resolveFree()));
  });
}

/** A TCP port on 127.0.0.1 that was free a moment ago. */
export async function freePort(): Promise<number> {
  return new Promise((resolvePort, reject) => {
    const server = createServer();
    server.once('error', reject);
    server.listen(0, '127.0.0.1', () => {
      const address = server.address();
      const port = typeof address === 'object' && address ? address.port : 0;
      server.close(() => resolvePort(port));
    });
  });
}

/** Polls `probe` until it returns true; fails after `timeoutMs` or as soon as a `watched` child ends. */
export async function waitFor(
  what: string,
  probe: () => Promise<boolean>,
  options: { timeoutMs: number; watched?: Child[]; intervalMs?: number },
): Promise<void> {
  const deadline = Date.now() + options.timeoutMs;
  for (;;) {
    const dead = options.watched?.find((c) => !c.running);
    if (dead) throw new Error(`${dead.report()}\n(while waiting for ${what})`);
    if (await probe().catch(() => false)) return;
    if (Date.now() > deadline) throw new Error(`${what} did not become ready within ${options.timeoutMs / 1000}s.`);
    await new Promise((r) => setTimeout(r, options.intervalMs ?? 250));
  }
}

/** The Prometheus text at `url` (a process's /metrics). */
export async function scrape(url: string, timeoutMs = 5000): Promise<string> {
  return (await fetch(url, { signal: AbortSignal.timeout(timeoutMs) })).text();
}

/**
 * The lines of Prometheus `text` that `select` keeps, their values summed (undefined when none
 * matched): one process's counter or gauge over its label sets.
 */
export function sumLines(text: string, select: (line: string) => boolean): number | undefined {
  const lines = text.split('\n').filter(select);
  return lines.length ? lines.reduce((total, line) => total + Number(line.split(' ').pop()), 0) : undefined;
}

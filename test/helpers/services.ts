import { spawn, type ChildProcess } from 'node:child_process';
import { join } from 'node:path';
import { Client as PgClient } from 'pg';
import { randomString } from '../../src/lib/ids';
import { createDb, migrateLatest } from '../../src/db/knex';
import { readRunEnv } from './stack';

const root = join(__dirname, '..', '..');

/**
 * A database of the test file's own, migrated: the API and worker processes a test starts run the
 * dispatcher and the relays over every merchant, which must not take other test files' rows.
 * `migrated: false` leaves it empty, for a test that migrates it step by step.
 */
export async function ownDatabase({ migrated = true }: { migrated?: boolean } = {}) {
  const { adminUrl } = readRunEnv();
  const name = `svc_test_own_${Date.now()}_${randomString(6).toLowerCase()}`;
  const admin = new PgClient({ connectionString: adminUrl });
  await admin.connect();
  await admin.query(`CREATE DATABASE ${name}`);
  const url = new URL(adminUrl);
  url.pathname = `/${name}`;
  const db = createDb(url.toString(), 4);
  if (migrated) await migrateLatest(db);
  return {
    url: url.toString(),
    db,
    async drop() {
      await db.destroy();
      await admin.query(`DROP DATABASE IF EXISTS ${name} WITH (FORCE)`);
      await admin.end();
    },
  };
}

/** A running `src/main/<entry>.ts` process and everything it wrote. */
export interface ServiceProcess {
  readonly output: () => string;
  readonly exited: Promise<number | null>;
  /** Sends `signal` (a graceful stop's SIGTERM) without waiting. */
  signal(signal: NodeJS.Signals): void;
  stop(): Promise<void>;
}

/** Starts `npm run api` or `npm run worker` (the real entry point) with `env` on top of PATH only. */
export function startService(entry: 'api' | 'worker', env: Record<string, string>): ServiceProcess {
  const child: ChildProcess = spawn(process.execPath, ['--import', 'tsx', join('src', 'main', `${entry}.ts`)], {
    cwd: root,
    env: { PATH: process.env.PATH, LOG_LEVEL: 'info', ...env },
  });
  let output = '';
  child.stdout!.on('data', (d) => (output += d));
  child.stderr!.on('data', (d) => (output += d));
  // 'close', not 'exit': by then every line the process wrote has been read.
  const exited = new Promise<number | null>((resolve) => child.on('close', (code) => resolve(code)));
  return {
    output: () => output,
    exited,
    signal: (signal) => void child.kill(signal),
    async stop() {
      if (child.exitCode !== null || child.signalCode !== null) return;
      child.kill('SIGTERM');
      const timer = setTimeout(() => child.kill('SIGKILL'), 10_000);
      await exited;
      clearTimeout(timer);
    },
  };
}

/** Polls `url` until it answers `status` (real time); returns the last body. */
export async function untilStatus(url: string, status: number, timeoutMs = 90_000): Promise<string> {
  const deadline = Date.now() + timeoutMs;
  let last = 'no answer';
  for (;;) {
    try {
      const res = await fetch(url, { signal: AbortSignal.timeout(5000) });
      last = `${res.status} ${await res.text()}`;
      if (res.status === status) return last;
    } catch (err) {
      last = err instanceof Error ? err.message : String(err);
    }
    if (Date.now() > deadline) throw new Error(`${url} did not answer ${status}: ${last}`);
    await new Promise((r) => setTimeout(r, 250));
  }
}

import { spawn } from 'node:child_process';
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { parse } from 'yaml';
import { loadSettings } from '../../src/config';
import { apiStopBoundMs } from '../../src/main/stop';
import { workerStopBoundMs } from '../../src/worker/stop';
import { createDb, Db } from '../../src/db/knex';
import { requireSecretKeyForLive } from '../../src/webhooks/runtime';
import { buildMerchant } from '../helpers/factories';
import { readRunEnv } from '../helpers/stack';
import { SERVICE_NODE_FLAGS } from '../../scripts/processes';

/**
 * The API and the worker refuse to start in live use (PARTNER_ENVIRONMENT=live, or a live Checkout
 * key in the database) without WEBHOOK_SECRET_KEY: the development key is in the repository.
 */
const root = join(__dirname, '..', '..');
const packageJson = JSON.parse(readFileSync(join(root, 'package.json'), 'utf8')) as { scripts: Record<string, string> };
const KEY = 'a'.repeat(64);
let db: Db;
let databaseUrl: string;
beforeAll(() => {
  databaseUrl = readRunEnv().databaseUrl;
  db = createDb(databaseUrl, 2);
});
afterAll(() => db.destroy());

/** Runs `src/main/<entry>.ts` until it exits; Temporal points at a closed port, so nothing gets far. */
function runEntry(entry: 'api' | 'worker', env: Record<string, string>) {
  return new Promise<{ code: number | null; output: string }>((resolve) => {
    const child = spawn(process.execPath, ['--import', 'tsx', join('src', 'main', `${entry}.ts`)], {
      cwd: root,
      env: {
        PATH: process.env.PATH,
        DATABASE_URL: databaseUrl,
        TEMPORAL_ADDRESS: '127.0.0.1:1',
        PORT: '0',
        HOST: '127.0.0.1',
        LOG_LEVEL: 'info',
        ...env,
      },
    });
    let output = '';
    child.stdout.on('data', (d) => (output += d));
    child.stderr.on('data', (d) => (output += d));
    const timer = setTimeout(() => child.kill('SIGKILL'), 45_000);
    child.on('exit', (code) => {
      clearTimeout(timer);
      resolve({ code, output });
    });
  });
}

describe.each(['api', 'worker'] as const)('npm run %s', (entry) => {
  it('refuses to start with PARTNER_ENVIRONMENT=live and no WEBHOOK_SECRET_KEY', async () => {
    const { code, output } = await runEntry(entry, { PARTNER_ENVIRONMENT: 'live' });
    expect(code).toBe(1);
    expect(output).toContain('WEBHOOK_SECRET_KEY must be set');
  });

  it('refuses to start when a live Checkout key exists and WEBHOOK_SECRET_KEY is unset', async () => {
    await buildMerchant(db, { mode: 'live', methods: ['cashondelivery'] });
    const { code, output } = await runEntry(entry, {});
    expect(code).toBe(1);
    expect(output).toContain('WEBHOOK_SECRET_KEY must be set');
  });
});

describe('requireSecretKeyForLive', () => {
  it('passes with a key set, even in live use', async () => {
    await buildMerchant(db, { mode: 'live', methods: ['cashondelivery'] });
    const settings = loadSettings({ PARTNER_ENVIRONMENT: 'live', WEBHOOK_SECRET_KEY: KEY });
    await expect(requireSecretKeyForLive(settings, db)).resolves.toBeUndefined();
  });

  it('names the reason: the live environment, or the live keys', async () => {
    await expect(requireSecretKeyForLive(loadSettings({ PARTNER_ENVIRONMENT: 'live' }), db)).rejects.toThrow(
      /PARTNER_ENVIRONMENT=live/,
    );
    await buildMerchant(db, { mode: 'live', methods: ['cashondelivery'] });
    await expect(requireSecretKeyForLive(loadSettings({}), db)).rejects.toThrow(/live Checkout key/);
  });
});

describe('docker-compose.yml', () => {
  const compose = readFileSync(join(root, 'docker-compose.yml'), 'utf8');

  it('requires WEBHOOK_SECRET_KEY (compose stops with a message when it is unset)', () => {
    expect(compose).toMatch(/^\s+WEBHOOK_SECRET_KEY: \$\{WEBHOOK_SECRET_KEY:\?[^}]+\}$/m);
  });

  it('publishes neither the Temporal frontend nor Postgres to the host', () => {
    expect(compose).not.toMatch(/['"]?(\d+\.\d+\.\d+\.\d+:)?7233:7233/);
    expect(compose).not.toMatch(/5432:5432/);
  });

  it('keeps the metrics ports on the compose network and checks readiness through them', () => {
    expect(compose).toMatch(/^\s+METRICS_HOST: 0\.0\.0\.0$/m);
    expect(compose).not.toMatch(/946[45]:946[45]/);
    expect(compose).toContain("fetch('http://127.0.0.1:9464/readyz')");
    expect(compose).toContain("fetch('http://127.0.0.1:9465/readyz')");
  });

  it('runs the API and the worker as node itself under an init, and waits for their graceful stop', () => {
    const services = (parse(compose, { merge: true }) as { services: Record<string, Record<string, any>> }).services;
    const seconds = (duration: string) => Number(/^(\d+)s$/.exec(duration)?.[1]) * 1000;
    const bounds = { api: apiStopBoundMs, worker: workerStopBoundMs };
    for (const role of ['api', 'worker'] as const) {
      const service = services[role];
      // No npm or shell in between: SIGTERM reaches node, and the container lives until node exits.
      // Node's flags as every start of the services has them (scripts/processes.ts).
      expect(service.command).toEqual(['node', ...SERVICE_NODE_FLAGS, '--import', 'tsx', `src/main/${role}.ts`]);
      expect(packageJson.scripts[role]).toBe(
        `exec node scripts/bootstrap.js ts ${SERVICE_NODE_FLAGS.join(' ')} src/main/${role}.ts`,
      );
      expect(service.init).toBe(true);
      const { SHUTDOWN_DRAIN_MS, SHUTDOWN_TIMEOUT_MS } = service.environment as Record<string, string | undefined>;
      const settings = loadSettings({ SHUTDOWN_DRAIN_MS, SHUTDOWN_TIMEOUT_MS });
      expect(seconds(service.stop_grace_period)).toBeGreaterThan(bounds[role](settings));
    }
    const dockerfile = readFileSync(join(root, 'Dockerfile'), 'utf8');
    const cmd = ['node', ...SERVICE_NODE_FLAGS, '--import', 'tsx', 'src/main/api.ts'].map((a) => `"${a}"`).join(', ');
    expect(dockerfile.split('\n')).toContain(`CMD [${cmd}]`);
  });
});

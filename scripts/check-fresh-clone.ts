import { execFileSync, spawn, spawnSync } from 'node:child_process';
import { lstatSync, mkdtempSync, readdirSync, readFileSync, readlinkSync, rmSync, statSync } from 'node:fs';
import { tmpdir, userInfo } from 'node:os';
import { delimiter, join } from 'node:path';
import { postgresHome } from './postgres-home';
import { freePort, repoRoot } from './processes';
import { findTemporalCli, findTestServer } from './toolchain';

/**
 * Run by `.ci/run` after `npm test`: the README's two commands as a new user runs them, as root
 * when we are root (or can become root with `sudo -n`), in a fresh clone of the committed state
 * (HEAD) inside a new mode-700 directory, without DATABASE_URL or TEMPORAL_ADDRESS:
 *   1. `npm start` runs on the Node version of .nvmrc (installing it into the clone's .tools/ when
 *      the machine's node, with the runtime this checkout installed taken off PATH, is another),
 *      installs with `npm ci`, answers /partner/v1/health, prints `ready` last, and stops
 *      everything on Ctrl-C;
 *   2. `npm test -- test/unit/lib.test.ts test/e2e/api-docs.test.ts` passes against a throwaway
 *      embedded Postgres (the lockfile, type, lint and format checks, one unit file and one browser
 *      test, whose Chromium npm test installs when missing; two files to keep CI short).
 * Removes the directory and the clone's Postgres home, and ends every process it started.
 * The Temporal binaries come from this checkout (TEMPORAL_CLI_PATH, TEMPORAL_TEST_SERVER_PATH),
 * so they are downloaded once, not once per clone.
 */

const READY_LINE = 'ready: press Ctrl-C to stop';
/** The runtime scripts/bootstrap.js pins, which the clone must run on. */
const PINNED_NODE = `v${readFileSync(join(repoRoot, '.nvmrc'), 'utf8').trim()}`;
/** npm ci, initdb and the first start of Temporal on a loaded two-core machine. */
const START_TIMEOUT_MS = 600_000;
const TEST_TIMEOUT_MS = 900_000;
/** A browser test the clone runs, so a Chromium that npm test fails to provide shows here. */
const BROWSER_TEST = 'test/e2e/api-docs.test.ts';
/** How long `ready` must stay the last line printed. */
const QUIET_AFTER_READY_MS = 5_000;

interface Outcome {
  name: string;
  passed: boolean;
  detail: string;
}

const outcomes: Outcome[] = [];

function record(name: string, passed: boolean, detail: string): void {
  outcomes.push({ name, passed, detail });
  process.stdout.write(`--- ${passed ? 'PASS' : 'FAIL'} ${name}: ${detail}\n`);
}

/** A running command of the clone, its output (stdout and stderr, in arrival order) echoed with a prefix. */
interface Run {
  pid: number;
  output: () => string;
  exited: Promise<number | null>;
  running: () => boolean;
}

function startRun(args: string[], cwd: string, env: NodeJS.ProcessEnv): Run {
  process.stdout.write(`\n$ npm ${args.join(' ')}   (in ${cwd})\n`);
  const child = spawn('npm', args, { cwd, env, detached: true, stdio: ['ignore', 'pipe', 'pipe'] });
  let output = '';
  let ended = false;
  const collect = (chunk: Buffer) => {
    const text = chunk.toString();
    output += text;
    process.stdout.write(text.replace(/^(?=.)/gm, '  | '));
  };
  child.stdout.on('data', collect);
  child.stderr.on('data', collect);
  const exited = new Promise<number | null>((resolve) => {
    child.on('close', (code) => {
      ended = true;
      resolve(code);
    });
    child.on('error', (err) => {
      output += `could not run npm: ${err.message}\n`;
      ended = true;
      resolve(null);
    });
  });
  return { pid: child.pid ?? 0, output: () => output, exited, running: () => !ended };
}

/** Resolves true once `condition` holds, false on timeout or once `run` has ended without it. */
async function until(condition: () => boolean, run: Run, timeoutMs: number): Promise<boolean> {
  const deadline = Date.now() + timeoutMs;
  while (!condition()) {
    if (!run.running() || Date.now() > deadline) return condition();
    await sleep(250);
  }
  return true;
}

async function sleep(ms: number): Promise<void> {
  await new Promise((resolve) => setTimeout(resolve, ms));
}

/** Waits for `run` to exit; after `timeoutMs` kills its process group and reports null. */
async function exitOf(run: Run, timeoutMs: number): Promise<number | null> {
  const timer = setTimeout(() => signalGroup(run.pid, 'SIGKILL'), timeoutMs);
  const code = await run.exited;
  clearTimeout(timer);
  return code;
}

function signalGroup(pid: number, signal: NodeJS.Signals): void {
  try {
    process.kill(-pid, signal);
  } catch {
    // already gone
  }
}

/** Processes (other than us) whose working directory or command line lies under one of `paths`. */
function processesUnder(paths: string[]): { pid: number; command: string }[] {
  const found: { pid: number; command: string }[] = [];
  for (const entry of readdirSync('/proc')) {
    const pid = Number(entry);
    if (!pid || pid === process.pid) continue;
    try {
      const command = readFileSync(`/proc/${pid}/cmdline`, 'utf8').split('\0').join(' ').trim();
      let cwd = '';
      try {
        cwd = readlinkSync(`/proc/${pid}/cwd`);
      } catch {
        // not ours to read
      }
      if (paths.some((p) => cwd === p || cwd.startsWith(`${p}/`) || command.includes(p))) found.push({ pid, command });
    } catch {
      // exited meanwhile
    }
  }
  return found;
}

function killAll(processes: { pid: number }[]): void {
  for (const { pid } of processes) {
    try {
      process.kill(pid, 'SIGKILL');
    } catch {
      // gone
    }
  }
}

/** Fails the check when processes of the clone outlive the command that started them; ends them by id. */
async function assertNoneLeft(what: string, paths: string[]): Promise<void> {
  let left = processesUnder(paths);
  for (let i = 0; i < 20 && left.length > 0; i++) {
    await sleep(250);
    left = processesUnder(paths);
  }
  killAll(left);
  record(
    `${what} leaves no process behind`,
    left.length === 0,
    left.length === 0 ? 'none left' : `killed ${left.map((p) => `${p.pid} (${p.command})`).join(', ')}`,
  );
}

/**
 * The environment of a new user: ours without the settings that would bypass the embedded services,
 * and without this checkout's runtime on PATH (the bootstrap put it first), so the clone finds the
 * machine's own node as a new user would.
 */
async function cloneEnv(): Promise<NodeJS.ProcessEnv> {
  const env: NodeJS.ProcessEnv = {};
  for (const [name, value] of Object.entries(process.env)) {
    if (!name.startsWith('npm_') && !['DATABASE_URL', 'TEMPORAL_ADDRESS', 'DATA_DIR', 'INIT_CWD'].includes(name)) {
      env[name] = value;
    }
  }
  const tools = join(repoRoot, '.tools');
  const path = (env.PATH ?? '')
    .split(delimiter)
    .filter((dir) => dir !== tools && !dir.startsWith(`${tools}/`))
    .join(delimiter);
  return {
    ...env,
    PATH: path,
    HOST: '127.0.0.1',
    PORT: String(await freePort()),
    EMBEDDED_PG_PORT: String(await freePort()),
    TEMPORAL_DEV_PORT: String(await freePort()),
    TEMPORAL_UI_PORT: String(await freePort()),
    TEMPORAL_CLI_PATH: findTemporalCli(),
    TEMPORAL_TEST_SERVER_PATH: findTestServer(),
    LOG_LEVEL: 'info',
  };
}

/** Clones HEAD of this repository into `dir`. */
function cloneHead(dir: string): string {
  const head = execFileSync('git', ['rev-parse', 'HEAD'], { cwd: repoRoot, encoding: 'utf8' }).trim();
  execFileSync('git', ['clone', '--quiet', '--no-checkout', repoRoot, dir], { stdio: 'inherit' });
  execFileSync('git', ['checkout', '--quiet', '--detach', head], { cwd: dir, stdio: 'inherit' });
  return head;
}

async function checkStart(clone: string, env: NodeJS.ProcessEnv, paths: string[]): Promise<void> {
  const run = startRun(['start'], clone, env);
  try {
    const ready = await until(() => run.output().includes(READY_LINE), run, START_TIMEOUT_MS);
    record('npm start prints ready', ready, ready ? 'ready' : 'no ready line (see the output above)');
    if (!ready) return;

    const url = `http://127.0.0.1:${env.PORT}/partner/v1/health`;
    const res = await fetch(url, { signal: AbortSignal.timeout(10_000) }).catch((err: Error) => err);
    const body = res instanceof Error ? res.message : `${res.status} ${await res.text()}`;
    record(`npm start answers ${url}`, !(res instanceof Error) && res.status === 200 && body.includes('"ok"'), body);

    const machineNode = spawnSync('node', ['--version'], { env, encoding: 'utf8' }).stdout?.trim();
    const runtimeLine =
      run
        .output()
        .split('\n')
        .find((line) => line.startsWith('Node v')) ?? '';
    record(
      `npm start runs on the pinned Node ${PINNED_NODE}`,
      runtimeLine.startsWith(`Node ${PINNED_NODE} `) &&
        (machineNode === PINNED_NODE || runtimeLine.includes('installed now from the npm registry')),
      `${runtimeLine || 'no "Node v..." line'} (the machine's node: ${machineNode ?? 'none'})`,
    );

    const installedWithCi = run.output().includes('Installing dependencies (npm ci)');
    record('npm start installs with npm ci', installedWithCi, installedWithCi ? 'yes' : 'no "npm ci" in the output');

    await sleep(QUIET_AFTER_READY_MS);
    const after = run
      .output()
      .slice(run.output().indexOf(READY_LINE) + READY_LINE.length)
      .trim();
    record(
      'ready is the last line npm start prints',
      after === '',
      after === '' ? `nothing after it in ${QUIET_AFTER_READY_MS / 1000}s` : `then: ${after.slice(0, 500)}`,
    );

    if (process.getuid?.() === 0) {
      const pgLink = join(clone, '.data', 'pg');
      const isLink = lstatSync(pgLink).isSymbolicLink();
      const target = isLink ? readlinkSync(pgLink) : '';
      record(
        'as root, the cluster lives in the Postgres home',
        isLink && target.startsWith(`${paths[1]}/`),
        isLink ? `.data/pg -> ${target}` : '.data/pg is not a symlink',
      );
    }
  } finally {
    signalGroup(run.pid, 'SIGINT'); // a terminal's Ctrl-C
    const code = await exitOf(run, 90_000);
    record('npm start stops on Ctrl-C', code === 0 && run.output().includes('Stopped.'), `exit ${code}`);
    await assertNoneLeft('npm start', paths);
  }
}

async function checkTest(clone: string, env: NodeJS.ProcessEnv, paths: string[]): Promise<void> {
  const run = startRun(['test', '--', 'test/unit/lib.test.ts', BROWSER_TEST], clone, env);
  const code = await exitOf(run, TEST_TIMEOUT_MS);
  const summary = /^jest: (\d+) passed, (\d+) failed.*$/m.exec(run.output());
  const embedded = run.output().includes('Initialising embedded Postgres');
  record(
    'npm test passes on embedded Postgres',
    code === 0 && embedded && !!summary && Number(summary[1]) > 0 && summary[2] === '0',
    `exit ${code}; ${summary?.[0] ?? 'no jest summary'}; ${embedded ? 'embedded Postgres' : 'no embedded Postgres'}`,
  );
  const browserPassed = new RegExp(`^PASS ${BROWSER_TEST.replace(/\./g, '\\.')}`, 'm').test(run.output());
  record(
    'npm test runs a browser test (Chromium installed by npm test when missing)',
    browserPassed,
    browserPassed ? `${BROWSER_TEST} passed` : `${BROWSER_TEST} did not pass (see the output above)`,
  );
  await assertNoneLeft('npm test', paths);
}

/** Re-runs this script with `sudo -n` when we are not root and may become root; returns its exit code. */
function asRootIfAllowed(): number | undefined {
  if (process.getuid?.() === 0) return undefined;
  if (spawnSync('sudo', ['-n', 'true'], { stdio: 'ignore' }).status !== 0) {
    process.stdout.write(`Not root and sudo -n is not allowed: checking as user ${userInfo().username}.\n`);
    return undefined;
  }
  const args = ['-n', '--preserve-env', process.execPath, '--import', 'tsx', __filename];
  return spawnSync('sudo', args, { cwd: repoRoot, stdio: 'inherit' }).status ?? 1;
}

async function main(): Promise<number> {
  const viaSudo = asRootIfAllowed();
  if (viaSudo !== undefined) return viaSudo;
  const env = await cloneEnv();
  const dir = mkdtempSync(join(tmpdir(), 'svc-fresh-clone-'));
  const clone = join(dir, 'shop');
  const mode = (statSync(dir).mode & 0o777).toString(8);
  const user = userInfo().username;
  let home: string | undefined;
  try {
    const head = cloneHead(clone);
    process.stdout.write(`Fresh clone of ${head.slice(0, 12)} in ${clone} (parent mode ${mode}), as ${user}.\n`);
    home = postgresHome(clone);
    await checkStart(clone, env, [clone, home]);
    await checkTest(clone, env, [clone, home]);
  } catch (err) {
    record('fresh clone', false, err instanceof Error ? err.message : String(err));
  } finally {
    killAll(processesUnder(home ? [clone, home] : [clone]));
    if (home) rmSync(home, { recursive: true, force: true });
    rmSync(dir, { recursive: true, force: true });
  }
  const failed = outcomes.filter((o) => !o.passed).length;
  process.stdout.write(`fresh-clone: ${outcomes.length - failed} passed, ${failed} failed\n`);
  return failed === 0 ? 0 : 1;
}

main().then(
  (code) => process.exit(code),
  (err: unknown) => {
    process.stderr.write(`check-fresh-clone failed: ${err instanceof Error ? err.message : String(err)}\n`);
    process.exit(1);
  },
);

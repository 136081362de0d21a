'use strict';
/**
 * `npm start` / `npm test` entry point, plain JavaScript because node_modules may not exist yet:
 * installs dependencies (`npm ci`: exactly package-lock.json's versions) when they are missing or
 * older than package-lock.json, then runs scripts/<command>.ts with the TypeScript loader,
 * forwarding signals and the exit code.
 *
 * The script runs as `node --import tsx`, not through the tsx CLI: the CLI kills its child with
 * SIGKILL when the child does not acknowledge a forwarded signal within 30 ms, which a busy
 * process on a slow machine can miss, leaving Postgres and Temporal orphaned. package.json starts
 * this file with `exec`: otherwise npm's intermediate shell dies on Ctrl-C at once, and npm exits
 * 130 while we are still stopping the children.
 */
const { spawn, spawnSync } = require('node:child_process');
const fs = require('node:fs');
const os = require('node:os');
const path = require('node:path');

const root = path.resolve(__dirname, '..');
const commands = ['start', 'test'];

/** True when node_modules is missing or older than package-lock.json. */
function needsInstall() {
  const installed = path.join(root, 'node_modules', '.package-lock.json');
  const lock = path.join(root, 'package-lock.json');
  if (!fs.existsSync(installed)) return true;
  return fs.existsSync(lock) && fs.statSync(lock).mtimeMs > fs.statSync(installed).mtimeMs;
}

/** Runs `npm ci` (a clean install of exactly what package-lock.json records) with inherited output; exits on failure. */
function install() {
  process.stdout.write('Installing dependencies (npm ci)...\n');
  const npm = process.platform === 'win32' ? 'npm.cmd' : 'npm';
  const result = spawnSync(npm, ['ci', '--no-audit', '--no-fund'], { cwd: root, stdio: 'inherit' });
  if (result.status !== 0) {
    process.stderr.write(
      `npm ci failed (${result.error ? result.error.message : `exit ${result.status}`}). If it says package.json ` +
        'and package-lock.json are out of sync, run `npm install --package-lock-only --ignore-scripts` and retry.\n',
    );
    process.exit(result.status || 1);
  }
}

/** Runs scripts/<command>.ts, forwarding SIGINT/SIGTERM, and exits as it exits. */
function run(command, args) {
  const child = spawn(process.execPath, ['--import', 'tsx', path.join('scripts', `${command}.ts`), ...args], {
    cwd: root,
    stdio: 'inherit',
  });
  const forward = (signal) => child.kill(signal);
  process.on('SIGINT', forward);
  process.on('SIGTERM', forward);
  child.on('error', (err) => {
    process.stderr.write(`could not run scripts/${command}.ts: ${err.message}\n`);
    process.exit(1);
  });
  child.on('exit', (code, signal) => process.exit(code ?? 128 + (os.constants.signals[signal] || 1)));
}

const [command, ...args] = process.argv.slice(2);
if (!commands.includes(command)) {
  process.stderr.write(`usage: node scripts/bootstrap.js <${commands.join('|')}> [args...]\n`);
  process.exit(2);
}
if (needsInstall()) install();
run(command, args);

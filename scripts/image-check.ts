import { spawnSync, type SpawnSyncOptions, type StdioOptions } from 'node:child_process';
import { createHash, randomBytes } from 'node:crypto';
import {
  chmodSync,
  closeSync,
  createReadStream,
  existsSync,
  lstatSync,
  mkdirSync,
  mkdtempSync,
  openSync,
  readdirSync,
  readFileSync,
  renameSync,
  rmSync,
  statSync,
  symlinkSync,
  writeFileSync,
} from 'node:fs';
import { join, relative } from 'node:path';
import { freePort, repoRoot, SERVICE_NODE_FLAGS, startChild, stopAll, waitFor, type Child } from './processes';
import { scratchDatabase } from './scratch-database';
import { ensureSystemPackages, SYSTEM_PACKAGES } from './system-packages';
import { startTemporalDevServer } from './temporal-dev-server';
import { findTemporalCli } from './toolchain';

/**
 * `npm run image:check`: builds the project's Dockerfile, unchanged, on the Node version pinned in
 * .nvmrc and runs the image far enough to show it works, on a machine with no container engine and
 * no access to Docker Hub (docs/runtime.md, "The image, checked without a container engine"):
 *   1. base rootfs: a Debian bookworm minbase (debootstrap from Debian's mirror, updated from
 *      bookworm-updates and bookworm-security, slimmed as debian:bookworm-slim is, with the `node`
 *      user of uid 1000 the official image has), cached in .tools/image-check until --refresh-base;
 *   2. base image: that rootfs plus the official Node binary from the npm registry (the bytes the
 *      bootstrap installs, checked against RUNTIME_INTEGRITY), the npm it bundles and an entrypoint
 *      like the official one, tagged docker.io/library/node:<pin>-bookworm-slim in a store of our
 *      own (.tools/image-check/storage-<driver>): the reconstruction stands in for the official image;
 *   3. build: `buildah bud --pull=never` of the Dockerfile (layers cached); when this machine's
 *      registry traffic needs an extra CA, npm's build gets it through a read-only mount, never a layer;
 *   4. contents: the node version, a non-root numeric user, no dev-only package, no git-ignored file
 *      (.env, .data, .tools, keys), nothing writable by the service's user, no build-time CA left;
 *   5. run: migrate, the API and the worker as the image runs them (its entrypoint and command, its
 *      user), against a scratch database on DATABASE_URL's server and a Temporal dev server, until
 *      `/partner/v1/health` and both `/readyz` answer 200; then each stops on SIGTERM and exits 0.
 * Prints each step's time. Needs root (buildah, debootstrap, chroot) and DATABASE_URL; installs
 * buildah and debootstrap from Debian when missing. `--refresh-base` rebuilds the rootfs and the base.
 */

const PIN = readFileSync(join(repoRoot, '.nvmrc'), 'utf8').trim();
const SUITE = 'bookworm';
const BASE_IMAGE = `docker.io/library/node:${PIN}-${SUITE}-slim`;
const APP_IMAGE = 'localhost/svc-payments-marketplace:image-check';
const WORK_DIR = join(repoRoot, '.tools', 'image-check');
const ROOTFS_TAR = join(WORK_DIR, `${SUITE}-slim-rootfs.tar`);
const DEBIAN_MIRROR = process.env.DEBIAN_MIRROR ?? 'http://deb.debian.org/debian';
const DEBIAN_SECURITY_MIRROR = process.env.DEBIAN_SECURITY_MIRROR ?? 'http://deb.debian.org/debian-security';
/** Labels on the base image recording what it was made of; a difference rebuilds it. */
const LABEL_PREFIX = 'org.svc-payments-marketplace.image-check';

const MINUTE = 60_000;
const DEADLINES = { debootstrap: 20 * MINUTE, prepare: 10 * MINUTE, build: 30 * MINUTE, short: 2 * MINUTE };
const READY_TIMEOUT_MS = 3 * MINUTE;
const STOP_TIMEOUT_MS = 60_000;

/** The runtime's package, fetched and checked by the bootstrap's own function. */
const bootstrap = require('./bootstrap.js') as {
  fetchRuntimePackage: (version: string, dir: string) => string;
  RUNTIME_INTEGRITY: Record<string, string>;
  runtimePackage: () => string;
};

const say = (line: string) => process.stdout.write(`${line}\n`);

/** Runs `name`, printing its outcome and time: `=== name: detail (12.3s)`. */
async function step<T>(name: string, run: () => T | Promise<T>, detail: (result: T) => string): Promise<T> {
  say(`\n=== ${name}`);
  const started = Date.now();
  const result = await run();
  say(`=== ${name}: ${detail(result)} (${((Date.now() - started) / 1000).toFixed(1)}s)`);
  return result;
}

/** Runs a command to its end within `timeout`; throws with its output when it fails. */
function run(command: string, args: string[], options: SpawnSyncOptions & { timeout: number }): string {
  const result = spawnSync(command, args, { encoding: 'utf8', maxBuffer: 256 * 1024 * 1024, ...options });
  if (result.status !== 0) {
    const output = `${String(result.stdout ?? '')}${String(result.stderr ?? '')}`.trim().split('\n').slice(-20);
    const why = result.error?.message ?? (result.signal ? `killed by ${result.signal}` : `exit ${result.status}`);
    throw new Error(`${command} ${args.join(' ')} failed (${why})${output.length ? `:\n${output.join('\n')}` : ''}`);
  }
  return String(result.stdout ?? '');
}

/** The containers/storage driver: overlay where this kernel and filesystem can mount it, else vfs (slow: a full copy per layer). */
function storageDriver(): 'overlay' | 'vfs' {
  const chosen = process.env.IMAGE_CHECK_STORAGE_DRIVER;
  if (chosen === 'overlay' || chosen === 'vfs') return chosen;
  const probe = mkdtempSync(join(WORK_DIR, 'overlay-probe-'));
  try {
    for (const dir of ['lower', 'upper', 'work', 'merged']) mkdirSync(join(probe, dir));
    const options = `lowerdir=${probe}/lower,upperdir=${probe}/upper,workdir=${probe}/work`;
    const mounted = spawnSync('mount', ['-t', 'overlay', 'overlay', '-o', options, join(probe, 'merged')]);
    if (mounted.status !== 0) return 'vfs';
    spawnSync('umount', [join(probe, 'merged')]);
    return 'overlay';
  } finally {
    rmSync(probe, { recursive: true, force: true });
  }
}

/** buildah's global flags for our own store of `driver`. */
function storeArgs(driver: string): string[] {
  const dirs = ['--root', join(WORK_DIR, `storage-${driver}`), '--runroot', join(WORK_DIR, `run-${driver}`)];
  return [...dirs, '--storage-driver', driver];
}

/** `buildah` on our own store, chroot isolation (no OCI runtime, cgroups or namespaces needed). */
function buildah(driver: string) {
  return (args: string[], options: Partial<SpawnSyncOptions> & { timeout?: number } = {}) =>
    run('buildah', [...storeArgs(driver), ...args], {
      timeout: DEADLINES.short,
      ...options,
      env: { ...process.env, BUILDAH_ISOLATION: 'chroot', ...options.env },
    });
}
type Buildah = ReturnType<typeof buildah>;

async function sha256Of(file: string): Promise<string> {
  const hash = createHash('sha256');
  for await (const chunk of createReadStream(file)) hash.update(chunk as Buffer);
  return hash.digest('hex');
}

/**
 * What runs inside the fresh rootfs: the official image's apt sources (updates and security), the
 * upgrades since the point release, debian:bookworm-slim's slimming (no docs, man pages or
 * locales, apt's lists and caches removed), and the official image's `node` user and group (1000).
 */
const PREPARE_ROOTFS = `set -eu
export DEBIAN_FRONTEND=noninteractive LC_ALL=C
rm -f /etc/apt/sources.list
cat > /etc/apt/sources.list.d/debian.sources <<EOF
Types: deb
URIs: ${DEBIAN_MIRROR}
Suites: ${SUITE} ${SUITE}-updates
Components: main
Signed-By: /usr/share/keyrings/debian-archive-keyring.gpg

Types: deb
URIs: ${DEBIAN_SECURITY_MIRROR}
Suites: ${SUITE}-security
Components: main
Signed-By: /usr/share/keyrings/debian-archive-keyring.gpg
EOF
cat > /etc/dpkg/dpkg.cfg.d/docker <<EOF
path-exclude /usr/share/doc/*
path-include /usr/share/doc/*/copyright
path-exclude /usr/share/groff/*
path-exclude /usr/share/info/*
path-exclude /usr/share/linda/*
path-exclude /usr/share/lintian/*
path-exclude /usr/share/locale/*
path-exclude /usr/share/man/*
EOF
cat > /etc/apt/apt.conf.d/docker-clean <<EOF
DPkg::Post-Invoke { "rm -f /var/cache/apt/archives/*.deb /var/cache/apt/archives/partial/*.deb /var/cache/apt/*.bin || true"; };
APT::Update::Post-Invoke { "rm -f /var/cache/apt/archives/*.deb /var/cache/apt/archives/partial/*.deb /var/cache/apt/*.bin || true"; };
Dir::Cache::pkgcache ""; Dir::Cache::srcpkgcache "";
EOF
echo 'Acquire::Languages "none";' > /etc/apt/apt.conf.d/docker-no-languages
apt-get update -qq
apt-get upgrade -y -qq -o Dpkg::Options::=--force-confold
find /usr/share/doc -mindepth 2 ! -name copyright ! -type d -delete
find /usr/share/doc -mindepth 1 -type d -empty -delete
rm -rf /usr/share/groff/* /usr/share/info/* /usr/share/linda/* /usr/share/lintian/* /usr/share/locale/* /usr/share/man/*
apt-get clean
rm -rf /var/lib/apt/lists/* /var/cache/apt/* /var/log/apt/* /var/log/*.log /var/cache/debconf/*-old /tmp/* /var/tmp/*
groupadd --gid 1000 node
useradd --uid 1000 --gid node --shell /bin/bash --create-home node
`;

/** The official image's entrypoint, in effect: `node` is prepended when the first argument is an option or not a command. */
const ENTRYPOINT = `#!/bin/sh
set -e
if [ "\${1#-}" != "$1" ] || [ -z "$(command -v "$1")" ] || { [ -f "$1" ] && ! [ -x "$1" ]; }; then
  set -- node "$@"
fi
exec "$@"
`;

/** Step 1: the cached Debian rootfs, made once (debootstrap, then PREPARE_ROOTFS in a chroot with its own mounts). */
function ensureRootfs(refresh: boolean): string {
  if (existsSync(ROOTFS_TAR) && !refresh) {
    const days = Math.floor((Date.now() - statSync(ROOTFS_TAR).mtimeMs) / 86_400_000);
    return `cached, made ${days} day(s) ago (--refresh-base for Debian's newest updates)`;
  }
  const dir = mkdtempSync(join(WORK_DIR, 'rootfs-'));
  try {
    run('debootstrap', ['--variant=minbase', SUITE, dir, DEBIAN_MIRROR], { timeout: DEADLINES.debootstrap });
    const script = `mount -t proc proc "$1/proc" && chroot "$1" /bin/sh -c "$2"`;
    run('unshare', ['--mount', '--fork', 'sh', '-ec', script, 'sh', dir, PREPARE_ROOTFS], {
      timeout: DEADLINES.prepare,
    });
    run('tar', ['--numeric-owner', '-C', dir, '-cf', `${ROOTFS_TAR}.tmp`, '.'], { timeout: DEADLINES.short });
    renameSync(`${ROOTFS_TAR}.tmp`, ROOTFS_TAR);
    return `made: Debian ${readFileSync(join(dir, 'etc', 'debian_version'), 'utf8').trim()} minbase, updated`;
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
}

/** The npm version a Node release bundles: the newest "upgrade npm to" in its package's CHANGELOG. */
function bundledNpm(unpackedNode: string): string {
  const changelog = readFileSync(join(unpackedNode, 'CHANGELOG.md'), 'utf8');
  const version = /\*\*deps\*\*: (?:upgrade|update) npm to (\d+\.\d+\.\d+)/.exec(changelog)?.[1];
  if (!version) throw new Error(`cannot tell which npm Node ${PIN} bundles from its CHANGELOG.md`);
  return version;
}

/** The base image's labels: what it is made of. */
function labelsOf(b: Buildah, image: string): Record<string, string> | undefined {
  try {
    const inspected = JSON.parse(b(['inspect', '--type', 'image', image])) as {
      OCIv1: { config?: { Labels?: Record<string, string> } };
    };
    return inspected.OCIv1.config?.Labels ?? {};
  } catch {
    return undefined;
  }
}

/** Step 2: docker.io/library/node:<pin>-bookworm-slim in our store, made unless it is made of the same rootfs and runtime. */
async function ensureBaseImage(b: Buildah): Promise<string> {
  const runtimeSpec = `${bootstrap.runtimePackage()}@${PIN}`;
  const wanted = {
    [`${LABEL_PREFIX}.rootfs-sha256`]: await sha256Of(ROOTFS_TAR),
    [`${LABEL_PREFIX}.node-integrity`]: bootstrap.RUNTIME_INTEGRITY[runtimeSpec] ?? '',
  };
  const labels = labelsOf(b, BASE_IMAGE);
  if (labels && Object.entries(wanted).every(([k, v]) => labels[k] === v)) {
    return `cached (${runtimeSpec}, ${labels[`${LABEL_PREFIX}.npm`]})`;
  }

  const downloads = mkdtempSync(join(WORK_DIR, 'downloads-'));
  const container = `image-check-base-${process.pid}`;
  try {
    const nodeTarball = bootstrap.fetchRuntimePackage(PIN, downloads);
    b(['from', '--name', container, 'scratch']);
    const root = b(['mount', container]).trim();
    const local = join(root, 'usr', 'local');
    run('tar', ['--numeric-owner', '-xf', ROOTFS_TAR, '-C', root], { timeout: DEADLINES.short });
    run('tar', ['-xzf', nodeTarball, '-C', local, '--strip-components=1', '--no-same-owner'], {
      timeout: DEADLINES.short,
    });
    rmSync(join(local, 'package.json')); // the npm package's own manifest; the official tarball has none
    const npmVersion = bundledNpm(local);
    const packed = JSON.parse(
      run('npm', ['pack', `npm@${npmVersion}`, '--pack-destination', downloads, '--json', '--loglevel=error'], {
        timeout: DEADLINES.short,
      }),
    ) as { filename: string; integrity: string }[];
    const npmDir = join(local, 'lib', 'node_modules', 'npm');
    mkdirSync(npmDir, { recursive: true });
    run('tar', ['-xzf', join(downloads, packed[0].filename), '-C', npmDir, '--strip-components=1', '--no-same-owner'], {
      timeout: DEADLINES.short,
    });
    symlinkSync('../lib/node_modules/npm/bin/npm-cli.js', join(local, 'bin', 'npm'));
    symlinkSync('../lib/node_modules/npm/bin/npx-cli.js', join(local, 'bin', 'npx'));
    symlinkSync('node', join(local, 'bin', 'nodejs'));
    writeFileSync(join(local, 'bin', 'docker-entrypoint.sh'), ENTRYPOINT);
    chmodSync(join(local, 'bin', 'docker-entrypoint.sh'), 0o755);
    b(['umount', container]);

    const npmLabel = `npm@${npmVersion} ${packed[0].integrity}`;
    const labels = Object.entries({ ...wanted, [`${LABEL_PREFIX}.npm`]: npmLabel }).flatMap(([k, v]) => [
      '--label',
      `${k}=${v}`,
    ]);
    const config = ['--env', `NODE_VERSION=${PIN}`, '--entrypoint', '["docker-entrypoint.sh"]', '--cmd', '["node"]'];
    b(['config', ...config, ...labels, container]);
    b(['commit', '--rm', container, BASE_IMAGE], { timeout: DEADLINES.prepare });
    return `made: ${runtimeSpec} (${wanted[`${LABEL_PREFIX}.node-integrity`]}), ${npmLabel}`;
  } catch (err) {
    removeContainer(b, container);
    throw err;
  } finally {
    rmSync(downloads, { recursive: true, force: true });
  }
}

/** Removes a working container if it exists (cleanup never hides the first error). */
function removeContainer(b: Buildah, name: string): void {
  try {
    b(['rm', name]);
  } catch {
    // not there
  }
}

/** The CA bundle this machine's npm trusts beyond Node's own roots (a TLS-inspecting egress proxy), if any. */
function extraCaFile(): string | undefined {
  const npmCafile = spawnSync('npm', ['config', 'get', 'cafile'], { encoding: 'utf8', timeout: 30_000 }).stdout?.trim();
  return [process.env.NODE_EXTRA_CA_CERTS, npmCafile].find(
    (file): file is string => !!file && file !== 'null' && file !== 'undefined' && existsSync(file),
  );
}

/**
 * Step 3: `buildah bud` of the Dockerfile on the base in our store. When npm here needs an extra CA,
 * it is mounted read-only over /usr/local/etc (empty in the base) with a global npmrc naming it:
 * RUN steps see it, no layer keeps it.
 */
function buildImage(b: Buildah): string {
  const args = ['bud', '--pull=never', '--layers', '--isolation', 'chroot', '--file', 'Dockerfile', '--tag', APP_IMAGE];
  const ca = extraCaFile();
  if (ca) {
    const etc = join(WORK_DIR, 'build-etc');
    rmSync(etc, { recursive: true, force: true });
    mkdirSync(etc);
    writeFileSync(join(etc, 'extra-ca.crt'), readFileSync(ca));
    writeFileSync(join(etc, 'npmrc'), 'cafile=/usr/local/etc/extra-ca.crt\n');
    args.push('--volume', `${etc}:/usr/local/etc:ro`);
  }
  b([...args, repoRoot], { timeout: DEADLINES.build, stdio: ['ignore', 'inherit', 'inherit'] });
  return `${APP_IMAGE}${ca ? `; npm's build trusted ${ca} through a read-only mount` : ''}`;
}

/** The parts of an image's OCI config the checks read. */
interface ImageConfig {
  User?: string;
  Env?: string[];
  Entrypoint?: string[] | null;
  Cmd?: string[] | null;
  WorkingDir?: string;
}

function imageConfig(b: Buildah, image: string): ImageConfig {
  return (
    (JSON.parse(b(['inspect', '--type', 'image', image])) as { OCIv1: { config?: ImageConfig } }).OCIv1.config ?? {}
  );
}

/** Every path under `dir` (files, links and directories), relative to it, skipping `skip` at the top. */
function walk(dir: string, skip: ReadonlySet<string> = new Set(), prefix = ''): string[] {
  const paths: string[] = [];
  for (const entry of readdirSync(join(dir, prefix), { withFileTypes: true })) {
    const path = prefix ? `${prefix}/${entry.name}` : entry.name;
    if (!prefix && skip.has(entry.name)) continue;
    paths.push(path);
    if (entry.isDirectory()) paths.push(...walk(dir, skip, path));
  }
  return paths;
}

/** Step 4: what the image holds and who runs it; the problems found, each a line (empty: none). */
function contentProblems(b: Buildah, container: string, config: ImageConfig): string[] {
  const problems: string[] = [];
  const user = config.User ?? '';
  const uid = /^(\d+)(?::\d+)?$/.exec(user)?.[1];
  if (uid === undefined || uid === '0') {
    problems.push(
      `USER is "${user}": it must be a numeric non-root uid (Kubernetes' runAsNonRoot can verify only a number).`,
    );
  }
  const printed = b(['run', container, '--', 'node', '--version']).trim();
  if (printed !== `v${PIN}`) problems.push(`node --version in the image prints ${printed}, not v${PIN}.`);
  const runsAs = b(['run', container, '--', 'id', '-u']).trim();
  if (uid !== undefined && runsAs !== uid) problems.push(`processes run as uid ${runsAs}, not the USER ${uid}.`);
  const secretEnv = (config.Env ?? []).map((e) => e.split('=')[0]).filter((n) => /SECRET|TOKEN|PASSWORD|KEY/i.test(n));
  if (secretEnv.length > 0) problems.push(`the image's environment names secrets: ${secretEnv.join(', ')}.`);

  const root = b(['mount', container]).trim();
  try {
    const app = join(root, (config.WorkingDir ?? '/app').replace(/^\//, ''));
    const lock = JSON.parse(readFileSync(join(app, 'package-lock.json'), 'utf8')) as {
      packages: Record<string, { dev?: boolean }>;
    };
    const devOnly = Object.entries(lock.packages)
      .filter(([path, entry]) => path && entry.dev && existsSync(join(app, path)))
      .map(([path]) => path);
    if (devOnly.length > 0) problems.push(`dev-only packages in the image: ${devOnly.slice(0, 10).join(', ')}.`);

    const files = walk(app, new Set(['node_modules']));
    const ignored = spawnSync('git', ['check-ignore', '--no-index', '--stdin'], {
      cwd: repoRoot,
      input: files.join('\n'),
      encoding: 'utf8',
    });
    const leaked = [...files.filter((f) => f === '.git' || f.startsWith('.git/')), ...ignored.stdout.split('\n')];
    if (leaked.filter(Boolean).length > 0) {
      problems.push(
        `git-ignored files in the image (.dockerignore must keep them out): ${leaked.filter(Boolean).slice(0, 10).join(', ')}.`,
      );
    }

    const writable = walk(app).filter((path) => {
      const stat = lstatSync(join(app, path));
      return !stat.isSymbolicLink() && (stat.uid !== 0 || (stat.mode & 0o022) !== 0);
    });
    if (writable.length > 0) {
      problems.push(
        `files the service could change (not root's, or group/world-writable): ${writable.slice(0, 10).join(', ')}.`,
      );
    }

    const leftovers = readdirSync(join(root, 'usr', 'local', 'etc'));
    if (leftovers.length > 0)
      problems.push(`/usr/local/etc holds ${leftovers.join(', ')} (the build's CA mount must leave nothing).`);
    say(
      `${files.length} files outside node_modules, ${Object.keys(lock.packages).length - 1} locked packages, user ${user}`,
    );
  } finally {
    b(['umount', container]);
  }
  return problems;
}

/** The process a `buildah run` child runs in the image: the first descendant whose argv[0] is node. */
function imageNode(buildahPid: number): number | undefined {
  const parents = new Map<number, number[]>();
  for (const name of readdirSync('/proc')) {
    if (!/^\d+$/.test(name)) continue;
    try {
      const stat = readFileSync(`/proc/${name}/stat`, 'utf8');
      const ppid = Number(stat.slice(stat.lastIndexOf(')') + 2).split(' ')[1]);
      parents.set(ppid, [...(parents.get(ppid) ?? []), Number(name)]);
    } catch {
      // it ended meanwhile
    }
  }
  const queue = [...(parents.get(buildahPid) ?? [])];
  while (queue.length > 0) {
    const pid = queue.shift()!;
    try {
      const argv0 = readFileSync(`/proc/${pid}/cmdline`, 'utf8').split('\0')[0];
      if (argv0 === 'node' || argv0.endsWith('/node')) return pid;
    } catch {
      continue;
    }
    queue.push(...(parents.get(pid) ?? []));
  }
  return undefined;
}

/** Sends SIGTERM to the node process inside `child` (buildah run kills rather than forwards) and waits for a clean exit. */
async function stopInImage(child: Child): Promise<string> {
  const node = child.pid === undefined ? undefined : imageNode(child.pid);
  if (node === undefined) throw new Error(`${child.name}: no node process found under buildah (${child.report()})`);
  process.kill(node, 'SIGTERM');
  const started = Date.now();
  const timer = setTimeout(() => child.kill(), STOP_TIMEOUT_MS);
  const info = await child.exited;
  clearTimeout(timer);
  if (info.code !== 0) throw new Error(`${child.name} did not exit 0 after SIGTERM: ${child.report()}`);
  return `${child.name} stopped on SIGTERM, exit 0 in ${((Date.now() - started) / 1000).toFixed(1)}s`;
}

async function answers(url: string): Promise<boolean> {
  const res = await fetch(url, { signal: AbortSignal.timeout(2000) });
  await res.body?.cancel();
  return res.status === 200;
}

/**
 * Step 5: migrate, then the API (the image's own entrypoint and command) and the worker (compose's
 * command), on the host's network against a scratch database and a Temporal dev server.
 */
async function runImage(b: Buildah, store: string[], container: string, config: ImageConfig): Promise<string[]> {
  const dataDir = join(repoRoot, '.data', `image-check-${process.pid}`);
  mkdirSync(dataDir, { recursive: true });
  const database = await scratchDatabase('image_check', 'npm run image:check');
  const report: string[] = [];
  let lap = Date.now();
  const done = (line: string) => {
    report.push(`${line} (${((Date.now() - lap) / 1000).toFixed(1)}s)`);
    lap = Date.now();
  };
  let passed = false;
  try {
    const [temporalPort, uiPort] = [await freePort(), await freePort()];
    const temporal = await startTemporalDevServer({
      cli: findTemporalCli(),
      port: temporalPort,
      uiPort,
      dbFile: join(dataDir, 'temporal.db'),
      namespace: 'default',
      logFile: join(dataDir, 'temporal.log'),
      timeoutMs: READY_TIMEOUT_MS,
    });
    done(`Temporal dev server on ${temporal.address}, scratch database ${database.name}`);
    const ports = {
      api: await freePort(),
      apiMetrics: await freePort(),
      worker: await freePort(),
      sdk: await freePort(),
    };
    const env = {
      DATABASE_URL: database.url,
      TEMPORAL_ADDRESS: temporal.address,
      TEMPORAL_NAMESPACE: 'default',
      HOST: '127.0.0.1',
      PORT: String(ports.api),
      METRICS_HOST: '127.0.0.1',
      METRICS_PORT: String(ports.apiMetrics),
      WORKER_METRICS_PORT: String(ports.worker),
      TEMPORAL_SDK_METRICS_PORT: String(ports.sdk),
      WEBHOOK_SECRET_KEY: randomBytes(32).toString('hex'),
    };
    const envFlags = Object.entries(env).flatMap(([k, v]) => ['--env', `${k}=${v}`]);
    const entrypoint = config.Entrypoint ?? [];
    const inImage = (command: string[]) => ['run', ...envFlags, container, '--', ...entrypoint, ...command];
    const tsx = (file: string) => ['node', '--import', 'tsx', file];

    b(inImage(tsx('src/main/migrate.ts')), { timeout: DEADLINES.prepare });
    done('migrate (node --import tsx src/main/migrate.ts) exited 0');

    const start = (name: string, command: string[]) => {
      const logFile = join(dataDir, `${name}.log`);
      const out = openSync(logFile, 'a');
      const spawnOptions = {
        stdio: ['ignore', out, out] as StdioOptions,
        env: { ...process.env, BUILDAH_ISOLATION: 'chroot' },
      };
      const child = startChild(`the image's ${name}`, 'buildah', [...store, ...inImage(command)], spawnOptions, {
        logFile,
      });
      closeSync(out);
      return child;
    };
    const ready = (what: string, url: string, child: Child) =>
      waitFor(what, () => answers(url), { timeoutMs: READY_TIMEOUT_MS, watched: [child] });
    const api = start('api', config.Cmd ?? []);
    const workerCommand = ['node', ...SERVICE_NODE_FLAGS, '--import', 'tsx', 'src/main/worker.ts'];
    const worker = start('worker', workerCommand);
    await ready(`the API's /partner/v1/health`, `http://127.0.0.1:${ports.api}/partner/v1/health`, api);
    await ready(`the API's /readyz`, `http://127.0.0.1:${ports.apiMetrics}/readyz`, api);
    if (!readFileSync(join(dataDir, 'api.log'), 'utf8').includes(`"node":"v${PIN}"`)) {
      throw new Error(`the API's start line does not say node v${PIN}:\n${api.report()}`);
    }
    done(
      `API (${[...entrypoint, ...(config.Cmd ?? [])].join(' ')}): /partner/v1/health and /readyz answer 200, ` +
        `its start line says node v${PIN}`,
    );
    await ready(`the worker's /readyz`, `http://127.0.0.1:${ports.worker}/readyz`, worker);
    done(`worker (${workerCommand.join(' ')}): /readyz answers 200 (Postgres and Temporal reached)`);
    report.push(await stopInImage(api), await stopInImage(worker));
    passed = true;
    return report;
  } finally {
    await stopAll();
    await database.drop();
    if (passed) rmSync(dataDir, { recursive: true, force: true });
    else say(`logs kept in ${relative(repoRoot, dataDir)}`);
  }
}

async function main(): Promise<number> {
  if (process.getuid?.() !== 0) {
    say('npm run image:check needs root: buildah builds and runs with chroot isolation, debootstrap makes the rootfs.');
    return 1;
  }
  if (!process.env.DATABASE_URL) {
    say('npm run image:check needs DATABASE_URL: the image runs against a scratch database on that server.');
    return 1;
  }
  const started = Date.now();
  mkdirSync(WORK_DIR, { recursive: true });
  await step(
    'system packages',
    () => ensureSystemPackages(SYSTEM_PACKAGES.filter((p) => p.neededBy.test(join(__dirname, 'image-check.ts')))),
    () => `buildah ${run('buildah', ['--version'], { timeout: DEADLINES.short }).trim().split(' ')[2]}, debootstrap`,
  );
  const driver = storageDriver();
  const b = buildah(driver);
  const store = storeArgs(driver);
  say(`containers storage: ${relative(repoRoot, join(WORK_DIR, `storage-${driver}`))} (${driver})`);

  await step(
    'base rootfs',
    () => ensureRootfs(process.argv.includes('--refresh-base')),
    (detail) => detail,
  );
  await step(
    `base image ${BASE_IMAGE}`,
    () => ensureBaseImage(b),
    (detail) => detail,
  );
  await step(
    'build the Dockerfile',
    () => buildImage(b),
    (detail) => detail,
  );
  const config = imageConfig(b, APP_IMAGE);
  const container = `image-check-${process.pid}`;
  try {
    const problems = await step(
      'contents',
      () => {
        b(['from', '--pull=never', '--name', container, APP_IMAGE], { timeout: DEADLINES.prepare });
        return contentProblems(b, container, config);
      },
      (found) => (found.length === 0 ? 'ok' : `${found.length} problem(s)`),
    );
    for (const problem of problems) say(`  PROBLEM: ${problem}`);
    const report = await step(
      'run',
      () => runImage(b, store, container, config),
      () => 'ok',
    );
    for (const line of report) say(`  ${line}`);
    say(
      `\nimage:check: ${problems.length === 0 ? 'passed' : 'failed'} in ${((Date.now() - started) / 1000).toFixed(1)}s (Node ${PIN}, ${driver})`,
    );
    return problems.length === 0 ? 0 : 1;
  } finally {
    removeContainer(b, container);
  }
}

if (require.main === module) {
  main().then(
    (code) => process.exit(code),
    async (err: unknown) => {
      await stopAll();
      say(`image:check failed: ${err instanceof Error ? err.message : String(err)}`);
      process.exit(1);
    },
  );
}

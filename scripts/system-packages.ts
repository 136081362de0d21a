import { spawnSync } from 'node:child_process';
import { accessSync, constants, statSync } from 'node:fs';
import { delimiter, join } from 'node:path';

/**
 * The one place that knows which system (Debian) packages the tests need and installs the missing
 * ones before jest starts: as root with apt-get, otherwise with `sudo -n` when that is allowed,
 * otherwise it stops with a message naming the package and the command. Self-contained (Node
 * built-ins only), so a test can run it as another user from a copy.
 */

/** A Debian package that some test files need. */
export interface SystemPackage {
  /** The Debian package name. */
  debian: string;
  /** Executables that must all be found for the package to count as installed. */
  binaries: string[];
  /** Test files (absolute paths) that need it. */
  neededBy: RegExp;
  /** Why, in a few words, for the messages. */
  why: string;
}

/** Every system package a test needs; a new one is a line here. */
export const SYSTEM_PACKAGES: readonly SystemPackage[] = [
  {
    debian: 'chromium',
    binaries: ['chromium'],
    neededBy: /[\\/]test[\\/](e2e[\\/]|integration[\\/]temporal-ui\.test\.ts$)/,
    why: 'the browser tests in test/e2e and the Temporal UI test drive headless Chromium',
  },
  {
    debian: 'prometheus',
    binaries: ['prometheus', 'promtool'],
    neededBy: /[\\/]test[\\/].*telemetry-[^\\/]*\.test\.ts$|[\\/]scripts[\\/]chaos\.ts$/,
    why: 'the telemetry tests and npm run chaos run a real Prometheus (and promtool)',
  },
  // npm run chaos (scripts/chaos.ts) installs the ones below through ensureSystemPackages, as npm test does
  // (faketime for test/integration/dependency-probes.test.ts too).
  {
    debian: 'prometheus-alertmanager',
    binaries: ['prometheus-alertmanager'],
    neededBy: /[\\/]scripts[\\/]chaos\.ts$/,
    why: 'npm run chaos routes the alerts through a real Alertmanager',
  },
  {
    debian: 'iptables',
    binaries: ['iptables'],
    neededBy: /[\\/]scripts[\\/]chaos\.ts$/,
    why: 'npm run chaos drops packets on loopback for its partitions',
  },
  {
    debian: 'faketime',
    binaries: ['faketime'],
    neededBy: /[\\/]scripts[\\/]chaos\.ts$|[\\/]test[\\/]integration[\\/]dependency-probes\.test\.ts$/,
    why: "npm run chaos and the dependency probes test move a process's clock with libfaketime",
  },
  // npm run image:check (scripts/image-check.ts) builds and runs the image without a container engine.
  {
    debian: 'buildah',
    binaries: ['buildah'],
    neededBy: /[\\/]scripts[\\/]image-check\.ts$/,
    why: 'npm run image:check builds the Dockerfile with buildah',
  },
  {
    debian: 'debootstrap',
    binaries: ['debootstrap'],
    neededBy: /[\\/]scripts[\\/]image-check\.ts$/,
    why: "npm run image:check makes the base image's Debian rootfs with debootstrap",
  },
];

/** Environment variables that point at a binary directly (a build of your own, another path). */
const BINARY_OVERRIDES: Record<string, string> = {
  chromium: 'CHROMIUM_PATH',
  prometheus: 'PROMETHEUS_PATH',
  promtool: 'PROMTOOL_PATH',
};

/** The path of `binary`: its override variable when set, else the first executable of that name on PATH. */
export function findSystemBinary(binary: string, env: NodeJS.ProcessEnv = process.env): string | undefined {
  const override = BINARY_OVERRIDES[binary];
  if (override && env[override]) return isExecutable(env[override]) ? env[override] : undefined;
  const dirs = (env.PATH ?? '').split(delimiter).filter(Boolean);
  return dirs.map((dir) => join(dir, binary)).find(isExecutable);
}

/** The packages of `packages` needed by at least one of `testFiles`. */
export function packagesFor(
  testFiles: string[],
  packages: readonly SystemPackage[] = SYSTEM_PACKAGES,
): SystemPackage[] {
  return packages.filter((pkg) => testFiles.some((file) => pkg.neededBy.test(file)));
}

/** Raised when a needed package is missing and cannot be installed here; the message says what to run. */
export class SystemPackageMissing extends Error {}

/**
 * Installs the packages of `packages` that are missing, printing what it does; throws
 * SystemPackageMissing (before anything else runs) when it cannot.
 */
export function ensureSystemPackages(packages: readonly SystemPackage[], env: NodeJS.ProcessEnv = process.env): void {
  const missing = packages.filter((pkg) => pkg.binaries.some((binary) => !findSystemBinary(binary, env)));
  if (missing.length === 0) return;
  const badOverride = missing
    .flatMap((pkg) => pkg.binaries.map((binary) => BINARY_OVERRIDES[binary]))
    .find((name) => name && env[name]);
  if (badOverride) throw new SystemPackageMissing(`${badOverride}=${env[badOverride]} is not an executable file.`);
  const names = missing.map((pkg) => pkg.debian).join(' ');
  const reasons = missing.map((pkg) => `${pkg.debian} (${pkg.why})`).join('; ');
  const prefix = rootPrefix(env);
  const aptGet = findSystemBinary('apt-get', env);
  if (!prefix || !aptGet) {
    const how = !aptGet ? 'there is no apt-get on PATH' : 'this user is not root and `sudo -n` is not allowed';
    throw new SystemPackageMissing(
      `npm test needs Debian's ${reasons}, and cannot install it: ${how}.\n` +
        `Install it, then run npm test again:  sudo apt-get install -y ${names}\n` +
        `(or run tests that do not need it, e.g. npm test -- test/unit)`,
    );
  }
  process.stdout.write(`Installing system packages for the tests with apt-get: ${reasons}...\n`);
  const aptEnv = { ...env, DEBIAN_FRONTEND: 'noninteractive' };
  const [command, ...before] = [...prefix, aptGet];
  const run = (args: string[]) =>
    spawnSync(command, [...before, ...args], { stdio: ['ignore', 'inherit', 'inherit'], env: aptEnv }).status === 0;
  const installed = run(['update', '-qq']) && run(['install', '-y', '-qq', ...missing.map((pkg) => pkg.debian)]);
  const stillMissing = missing.filter((pkg) => pkg.binaries.some((binary) => !findSystemBinary(binary, env)));
  if (!installed || stillMissing.length > 0) {
    throw new SystemPackageMissing(
      `npm test could not install ${stillMissing.map((pkg) => pkg.debian).join(' ') || names} with apt-get ` +
        `(see its output above). Install it by hand: sudo apt-get install -y ${names}`,
    );
  }
  process.stdout.write(`Installed: ${names}\n`);
}

/** The command prefix that runs apt-get as root: none when we are root, `sudo -n` when allowed, undefined otherwise. */
function rootPrefix(env: NodeJS.ProcessEnv): string[] | undefined {
  if (process.getuid?.() === 0) return [];
  const sudo = findSystemBinary('sudo', env);
  if (sudo && spawnSync(sudo, ['-n', 'true'], { stdio: 'ignore', env }).status === 0) return [sudo, '-n'];
  return undefined;
}

/** True when `path` is a regular file we may execute. */
export function isExecutable(path: string): boolean {
  try {
    accessSync(path, constants.X_OK);
    return statSync(path).isFile();
  } catch {
    return false;
  }
}

// `node system-packages.js <debian name>...`: ensures those packages (a test runs it as another user).
if (require.main === module) {
  const wanted = process.argv.slice(2);
  try {
    ensureSystemPackages(SYSTEM_PACKAGES.filter((pkg) => wanted.includes(pkg.debian)));
  } catch (err) {
    process.stderr.write(`${err instanceof Error ? err.message : String(err)}\n`);
    process.exit(1);
  }
}

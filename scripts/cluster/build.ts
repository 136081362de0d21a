import { spawn } from 'node:child_process';
import { chmodSync, copyFileSync, existsSync, mkdirSync, renameSync } from 'node:fs';
import { basename, delimiter, dirname, join } from 'node:path';
import { goCacheDirs, machineBuildDir, serverBinary, sqlToolBinary, TEMPORAL_SERVER_VERSION } from './settings';

const MODULE = 'go.temporal.io/server';
/** The two main packages: the server (every service) and the SQL schema tool with the embedded schemas. */
export const GO_PACKAGES = [`${MODULE}/cmd/server`, `${MODULE}/cmd/tools/sql`];

/** The `go` command: on PATH, else where the Go tarball installs it. */
export function findGo(env: NodeJS.ProcessEnv = process.env): string {
  const dirs = [...(env.PATH ?? '').split(delimiter), '/usr/local/go/bin'];
  const found = dirs.map((dir) => join(dir, 'go')).find((path) => existsSync(path));
  if (!found)
    throw new Error(
      'The Go toolchain is needed to build the Temporal server: `go` is not on PATH nor in /usr/local/go/bin.',
    );
  return found;
}

/** The environment of the build: caches under .tools/, this machine's Go (no toolchain download), no cgo. */
export function goEnv(env: NodeJS.ProcessEnv = process.env): NodeJS.ProcessEnv {
  return {
    ...env,
    ...goCacheDirs,
    GOBIN: dirname(serverBinary),
    GOTOOLCHAIN: 'local',
    CGO_ENABLED: '0',
    // Reproducible paths in the binaries; a module cache that `rm -rf .tools` can remove.
    GOFLAGS: '-trimpath -modcacherw',
  };
}

/** The `go install` arguments for the pinned release. */
export const goInstallArgs = (): string[] => [
  'install',
  ...GO_PACKAGES.map((pkg) => `${pkg}@v${TEMPORAL_SERVER_VERSION}`),
];

/** Where a build of the pinned release is found: this checkout's .tools/, the machine's cache, or nowhere. */
export function findBuild(env: NodeJS.ProcessEnv = process.env): 'checkout' | 'machine cache' | null {
  const has = (dir: string) => [serverBinary, sqlToolBinary].every((b) => existsSync(join(dir, basename(b))));
  if (has(dirname(serverBinary))) return 'checkout';
  if (has(machineBuildDir(env))) return 'machine cache';
  return null;
}

/** Copies both binaries from `from` to `to` (each through a temporary name, so a reader never sees half a file). */
function copyBinaries(from: string, to: string): void {
  mkdirSync(to, { recursive: true });
  for (const binary of [serverBinary, sqlToolBinary].map((b) => basename(b))) {
    const partial = join(to, `.${binary}.${process.pid}`);
    copyFileSync(join(from, binary), partial);
    chmodSync(partial, 0o755);
    renameSync(partial, join(to, binary));
  }
}

/**
 * Builds the server and the SQL tool into .tools/temporal-server-<version>/bin unless both are
 * there already (a second run builds nothing and does not run `go` at all) or in the machine's
 * cache (machineBuildDir: copied from there). After a build the binaries are copied to that cache,
 * for the next clean clone. Returns the seconds the build took, 0 when it was reused.
 */
export async function ensureServerBuilt(say: (line: string) => void): Promise<number> {
  const found = findBuild();
  if (found === 'checkout') return 0;
  if (found === 'machine cache') {
    copyBinaries(machineBuildDir(), dirname(serverBinary));
    say(`Temporal server ${TEMPORAL_SERVER_VERSION}: the build copied from ${machineBuildDir()}.`);
    return 0;
  }
  const go = findGo();
  mkdirSync(dirname(serverBinary), { recursive: true });
  say(`Building Temporal server ${TEMPORAL_SERVER_VERSION} from its Go module (first run: several minutes)...`);
  say(`  ${go} ${goInstallArgs().join(' ')}`);
  const started = Date.now();
  // Niced: the build takes both cores of a small machine for minutes.
  const code = await new Promise<number | null>((resolveCode, reject) => {
    const child = spawn('nice', ['-n', '10', go, ...goInstallArgs()], {
      env: goEnv(),
      stdio: ['ignore', 'inherit', 'inherit'],
    });
    child.once('error', reject);
    child.once('exit', resolveCode);
  });
  if (code !== 0)
    throw new Error(
      `go install of Temporal server ${TEMPORAL_SERVER_VERSION} failed (exit ${code}); its output is above.`,
    );
  try {
    copyBinaries(dirname(serverBinary), machineBuildDir());
    say(`  kept for other checkouts in ${machineBuildDir()}`);
  } catch (err) {
    say(`  not kept in ${machineBuildDir()}: ${err instanceof Error ? err.message : String(err)}`);
  }
  return Math.round((Date.now() - started) / 1000);
}

import { spawnSync } from 'node:child_process';
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { repoRoot } from './processes';

/**
 * Part of `npm test`: fails when package-lock.json and package.json disagree, so that `npm ci`
 * (the bootstrap of `npm start` and `npm test`, the Dockerfile, CI systems) installs from the
 * committed lockfile on any machine. Offline and about a second.
 *   1. The lockfile's root entry lists exactly package.json's dependencies (npm ci itself does
 *      not notice one removed from package.json).
 *   2. `npm ci --dry-run --offline` accepts it: every dependency of every package, including
 *      other platforms' optional packages, has an entry whose version fits.
 */

const FIX =
  'Update the lockfile with `npm install --package-lock-only --ignore-scripts` (it records every ' +
  "platform's optional packages) and commit package-lock.json.";
const DEPENDENCY_FIELDS = ['dependencies', 'devDependencies', 'optionalDependencies', 'peerDependencies'] as const;

type Manifest = Partial<Record<(typeof DEPENDENCY_FIELDS)[number], Record<string, string>>>;

/** The differences between package.json's dependency lists and the lockfile's root entry. */
function rootDifferences(): string[] {
  const manifest = readJson<Manifest>('package.json');
  const lock = readJson<{ packages?: Record<string, Manifest> }>('package-lock.json');
  const root = lock.packages?.[''] ?? {};
  const differences: string[] = [];
  for (const field of DEPENDENCY_FIELDS) {
    const wanted = manifest[field] ?? {};
    const locked = root[field] ?? {};
    for (const name of new Set([...Object.keys(wanted), ...Object.keys(locked)])) {
      if (wanted[name] === locked[name]) continue;
      differences.push(
        `${field}.${name}: package.json has ${wanted[name] ?? 'nothing'}, package-lock.json has ${locked[name] ?? 'nothing'}`,
      );
    }
  }
  return differences;
}

/** npm's own complaint about the lockfile, or undefined when `npm ci` would accept it. */
function npmCiComplaint(): string | undefined {
  const npm = process.platform === 'win32' ? 'npm.cmd' : 'npm';
  const args = ['ci', '--dry-run', '--offline', '--ignore-scripts', '--no-audit', '--no-fund', '--loglevel=error'];
  const result = spawnSync(npm, args, { cwd: repoRoot, encoding: 'utf8' });
  if (result.status === 0) return undefined;
  const lines = `${result.stdout ?? ''}${result.stderr ?? ''}`.split('\n').filter((l) => l.startsWith('npm error'));
  return lines.join('\n') || result.error?.message || `npm ci --dry-run exited with ${result.status}`;
}

function readJson<T>(file: string): T {
  return JSON.parse(readFileSync(join(repoRoot, file), 'utf8')) as T;
}

function main(): number {
  const differences = rootDifferences();
  if (differences.length > 0) {
    process.stderr.write(`package-lock.json does not match package.json:\n  ${differences.join('\n  ')}\n${FIX}\n`);
    return 1;
  }
  const complaint = npmCiComplaint();
  if (complaint) {
    process.stderr.write(`npm ci would refuse package-lock.json:\n${complaint}\n${FIX}\n`);
    return 1;
  }
  process.stdout.write('package-lock.json matches package.json; npm ci accepts it.\n');
  return 0;
}

process.exit(main());

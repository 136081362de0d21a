import { execFileSync, spawnSync } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import type { Knex } from 'knex';
import { type MigrationList, type Phase } from '../migrations';
import { createDb } from '../src/db/knex';
import { migrate, type SentStatement } from '../src/db/migrator';
import { scratchDatabase } from './scratch-database';
import { repoRoot } from './processes';

/**
 * The migration check of `npm test` (scripts/check-migrations.ts), and its parts. Each migration
 * the newest release of releases.tsv did not apply runs through the real runner on a scratch
 * database migrated up to just before it; the SQL it sends (knex's `query` event, and the runner's
 * SETs on each connection) is linted by squawk (.squawk.toml) and by the project's rules below,
 * by phase: an expand migration runs beside the previous release, a contract one after it
 * (docs/operations.md, "Migrations: expand and contract").
 */

/** One unsafe statement: which migration, which rule (squawk's or ours), what it does, and the statement. */
export interface Finding {
  migration: string;
  rule: string;
  by: 'squawk' | 'project';
  message: string;
  help?: string;
  statement: string;
}

/** The project's rules, which squawk does not have; `-- squawk-ignore <rule>` in a statement waives one, as for squawk's. */
export const PROJECT_RULES = {
  'table-rewrite': 'Rewrites the whole table under an ACCESS EXCLUSIVE lock: no reads or writes meanwhile.',
  'timeout-disabled':
    'Turns off a lock or statement timeout: a migration always runs under both (declare longer ones in the file).',
  'validate-in-expand':
    'VALIDATE CONSTRAINT in an expand migration: the previous release may still write rows that fail it; validate in a contract migration.',
  'backfill-in-migration':
    'Moves rows of an existing table inside a migration: a backfill runs batched and throttled as application code or an ops command, finished by a later release.',
  'concurrent-index-not-rerunnable':
    'An index built CONCURRENTLY without first dropping an INVALID copy left by a failed build: a retry (or a second run) keeps the invalid index.',
  'migration-failed': 'The migration failed on a scratch database migrated up to just before it.',
} as const;

export type ProjectRule = keyof typeof PROJECT_RULES;

/** The squawk rules a contract migration may break: it runs once the previous release is gone. */
const CONTRACT_MAY = /^ban-drop-/;

// ---- Which migrations are new -------------------------------------------------------------------

/** A line of releases.tsv. */
export interface Release {
  version: string;
  commit: string;
  date: string;
}

/** The newest release of releases.tsv (its last line). */
export function newestRelease(root = repoRoot): Release {
  const lines = readFileSync(join(root, 'releases.tsv'), 'utf8')
    .split('\n')
    .filter((l) => l.trim() && !l.startsWith('#') && !l.startsWith('version\t'));
  const [version, commit, date] = lines.at(-1)!.split('\t');
  return { version, commit, date };
}

/**
 * The migrations of `list` that `release` did not apply: those missing from its
 * `migrations/index.ts` (`git show`). Without git or the commit, every migration dated on or after
 * the release's day, and a note that says so.
 */
export function newMigrations(
  list: MigrationList,
  release: Release,
  root = repoRoot,
): { names: string[]; note?: string } {
  let released: Set<string>;
  try {
    const index = execFileSync('git', ['show', `${release.commit}:migrations/index.ts`], {
      cwd: root,
      encoding: 'utf8',
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    released = new Set([...index.matchAll(/\['(\d{14}_\w+)'/g)].map((m) => m[1]));
    if (released.size === 0) throw new Error('it lists no migrations');
  } catch (err) {
    const stderr = String((err as { stderr?: unknown }).stderr ?? '').trim();
    const reason = stderr.split('\n').at(-1) || (err instanceof Error ? err.message.split('\n')[0] : String(err));
    const day = release.date.replace(/-/g, '');
    return {
      names: list.map(([name]) => name).filter((name) => name.slice(0, 8) >= day),
      note:
        `could not read release ${release.version}'s migrations (git show ${release.commit}:migrations/index.ts: ` +
        `${reason}): every migration dated ${release.date} or later counts as new`,
    };
  }
  return { names: list.map(([name]) => name).filter((name) => !released.has(name)) };
}

// ---- SQL text -----------------------------------------------------------------------------------

/** `sql` split into top-level statements (not inside quotes, dollar quotes or comments), trimmed, without `;`. */
export function splitStatements(sql: string): string[] {
  const out: string[] = [];
  const dollarQuote = /\$(\w*)\$/y;
  /** The index of the last character of what opens at `i` (a comment, a quoted text), or `i` itself. */
  const endOf = (i: number): number => {
    const close = (text: string, from: number) => {
      const at = sql.indexOf(text, from);
      return at < 0 ? sql.length : at + text.length - 1;
    };
    if (sql.startsWith('--', i)) return close('\n', i);
    if (sql.startsWith('/*', i)) return close('*/', i + 2);
    if (sql[i] === "'" || sql[i] === '"') return close(sql[i], i + 1);
    dollarQuote.lastIndex = i;
    const tag = dollarQuote.exec(sql)?.[0];
    return tag ? close(tag, i + tag.length) : i;
  };
  let start = 0;
  for (let i = 0; i < sql.length; i = endOf(i) + 1) {
    if (sql[i] === ';') {
      out.push(sql.slice(start, i));
      start = i + 1;
    }
  }
  out.push(sql.slice(start));
  return out.map((s) => s.trim()).filter((s) => s.replace(/--[^\n]*/g, '').trim() !== '');
}

/** The statement without comments, on one line. */
const code = (statement: string) =>
  statement
    .replace(/--[^\n]*/g, ' ')
    .replace(/\/\*[\s\S]*?\*\//g, ' ')
    .replace(/\s+/g, ' ')
    .trim();

/** A name as Postgres folds it: quotes off, lower case unless quoted, no schema. */
const bare = (name: string) => {
  const last = name.split('.').at(-1)!;
  return last.startsWith('"') ? last.slice(1, -1) : last.toLowerCase();
};

/** Rules waived in the statement by `-- squawk-ignore rule[, rule]` comments. */
const waived = (statement: string) =>
  new Set([...statement.matchAll(/squawk-ignore\s+([\w-]+(?:\s*,\s*[\w-]+)*)/g)].flatMap((m) => m[1].split(/\s*,\s*/)));

/** How a statement shows in a finding: one line, at most 240 characters. */
const shown = (statement: string) => {
  const line = statement.replace(/\s+/g, ' ').trim();
  return line.length > 240 ? `${line.slice(0, 237)}...` : line;
};

// ---- Linting ------------------------------------------------------------------------------------

/** What a migration is, for its lint. */
export interface LintSubject {
  name: string;
  phase: Phase;
  transactional: boolean;
  /** `table.column` pairs with a validated CHECK (column IS NOT NULL) before the migration ran. */
  notNullChecked: ReadonlySet<string>;
}

interface SquawkViolation {
  line: number;
  line_end: number;
  message: string;
  help: string | null;
  rule_name: string;
}

/** squawk's findings on `statements`, each with the statement it is in. */
function squawkFindings(squawk: string, subject: LintSubject, statements: string[]): Finding[] {
  const dir = mkdtempSync(join(tmpdir(), 'migration-lint-'));
  try {
    const starts: number[] = [];
    let text = '';
    for (const statement of statements) {
      starts.push(text.split('\n').length - 1);
      text += `${statement};\n\n`;
    }
    const file = join(dir, `${subject.name}.sql`);
    writeFileSync(file, text);
    const result = spawnSync(
      squawk,
      [
        '--config',
        join(repoRoot, '.squawk.toml'),
        '--reporter',
        'json',
        subject.transactional ? '--assume-in-transaction' : '--no-assume-in-transaction',
        file,
      ],
      { encoding: 'utf8', cwd: dir },
    );
    let violations: SquawkViolation[];
    try {
      violations = JSON.parse(result.stdout);
    } catch {
      throw new Error(`squawk failed (exit ${result.status}): ${result.stderr || result.stdout}`);
    }
    return violations.map((v) => {
      let at = 0;
      while (at + 1 < starts.length && starts[at + 1] <= v.line) at += 1;
      return {
        migration: subject.name,
        rule: v.rule_name,
        by: 'squawk' as const,
        message: v.message,
        ...(v.help ? { help: v.help } : {}),
        statement: statements[at],
      };
    });
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
}

/** Whether squawk's finding does not apply here: a phase's allowance, or a case it cannot see. */
function exempt(finding: Finding, subject: LintSubject): boolean {
  const sql = code(finding.statement);
  if (subject.phase === 'contract' && CONTRACT_MAY.test(finding.rule)) return true;
  // An index on ONLY a partitioned table is catalog only (invalid until each partition's copy,
  // built CONCURRENTLY, is attached); CONCURRENTLY is not allowed there.
  if (finding.rule === 'require-concurrent-index-creation' && /\bON\s+ONLY\b/i.test(sql)) return true;
  // SET NOT NULL reads no row when a validated CHECK (column IS NOT NULL) exists; squawk only sees
  // one validated in the same file.
  if (finding.rule === 'adding-not-nullable-field') {
    const table = /^ALTER TABLE (?:IF EXISTS )?(?:ONLY )?("[^"]+"|[\w.]+)/i.exec(sql)?.[1];
    const columns = [...sql.matchAll(/ALTER (?:COLUMN )?("[^"]+"|\w+) SET NOT NULL/gi)].map((m) => bare(m[1]));
    if (table && columns.length > 0 && columns.every((c) => subject.notNullChecked.has(`${bare(table)}.${c}`))) {
      return true;
    }
  }
  // Our rules are waived with squawk's comment, which squawk does not know.
  if (finding.rule === 'unused-ignore' && Object.keys(PROJECT_RULES).some((r) => finding.message.endsWith(` ${r}`))) {
    return true;
  }
  return false;
}

/** The project's rules over the migration's own statements, in order. */
function projectFindings(subject: LintSubject, statements: string[]): Finding[] {
  const findings: Finding[] = [];
  const created = new Set<string>();
  const seen: string[] = [];
  for (const statement of statements) {
    const sql = code(statement);
    const flag = (rule: ProjectRule) => {
      if (!waived(statement).has(rule)) {
        findings.push({ migration: subject.name, rule, by: 'project', message: PROJECT_RULES[rule], statement });
      }
    };
    const createdTable = /^CREATE (?:UNLOGGED )?TABLE (?:IF NOT EXISTS )?("[^"]+"|[\w.]+)/i.exec(sql);
    if (createdTable) created.add(bare(createdTable[1]));

    if (
      /^ALTER TABLE .*\bSET (?:UNLOGGED|LOGGED|TABLESPACE|ACCESS METHOD)\b/i.test(sql) ||
      /^VACUUM (?:\([^)]*\bFULL\b[^)]*\)|FULL\b)/i.test(sql) ||
      /^CLUSTER\b/i.test(sql)
    ) {
      flag('table-rewrite');
    }
    if (
      /^SET (?:LOCAL |SESSION )?(?:lock_timeout|statement_timeout) *(?:=|TO) *(?:'?0(?:ms|s|min)?'?|DEFAULT)$/i.test(
        sql,
      ) ||
      /^RESET (?:lock_timeout|statement_timeout|ALL)$/i.test(sql) ||
      /set_config\( *'(?:lock_timeout|statement_timeout)' *, *'0/i.test(sql)
    ) {
      flag('timeout-disabled');
    }
    if (subject.phase === 'expand' && /\bVALIDATE CONSTRAINT\b/i.test(sql)) flag('validate-in-expand');

    const changed = /^(?:WITH\b.*\)\s*)?(?:UPDATE (?:ONLY )?|DELETE FROM (?:ONLY )?)("[^"]+"|[\w.]+)/i.exec(sql);
    const copied =
      /^(?:WITH\b.*\)\s*)?INSERT INTO .*?\bSELECT\b.*?\bFROM (?:ONLY )?("[^"]+"|[\w.]+)(?![\w.(]| +\()/i.exec(sql);
    const moved = changed?.[1] ?? copied?.[1];
    if (moved && !created.has(bare(moved))) flag('backfill-in-migration');

    const concurrent = /^CREATE (?:UNIQUE )?INDEX CONCURRENTLY (?:IF NOT EXISTS )?("[^"]+"|[\w.]+)? ?ON\b/i.exec(sql);
    if (concurrent && !subject.transactional) {
      const name = concurrent[1] ? bare(concurrent[1]) : undefined;
      const cleared = seen.some(
        (s) =>
          /\bindisvalid\b/i.test(s) ||
          (name !== undefined &&
            new RegExp(`^DROP INDEX CONCURRENTLY IF EXISTS (?:[\\w"]+\\.)?"?${name}"?$`, 'i').test(code(s))),
      );
      if (!name || !cleared) flag('concurrent-index-not-rerunnable');
    }
    seen.push(statement);
  }
  return findings;
}

/**
 * Lints what one migration sent: squawk over everything (the runner's SETs first), less what its
 * phase or the database allows, then the project's rules over the migration's own statements.
 */
export function lintStatements(squawk: string, subject: LintSubject, sent: readonly SentStatement[]): Finding[] {
  const all = sent.flatMap((s) => splitStatements(s.sql).map((sql) => ({ sql, by: s.by })));
  const squawked = squawkFindings(
    squawk,
    subject,
    all.map((s) => s.sql),
  ).filter((f) => !exempt(f, subject));
  const own = projectFindings(
    subject,
    all.filter((s) => s.by === 'migration').map((s) => s.sql),
  );
  return [...squawked, ...own];
}

/** `table.column` of every validated CHECK (column IS NOT NULL) in the database. */
async function notNullChecked(db: Knex): Promise<Set<string>> {
  const { rows } = await db.raw(
    `SELECT c.conrelid::regclass::text AS "table", pg_get_constraintdef(c.oid) AS def
       FROM pg_constraint c WHERE c.contype = 'c' AND c.convalidated`,
  );
  const out = new Set<string>();
  for (const { table, def } of rows as Array<{ table: string; def: string }>) {
    const column = /^CHECK \(\(("[^"]+"|\w+) IS NOT NULL\)\)$/.exec(def)?.[1];
    if (column) out.add(`${bare(table)}.${bare(column)}`);
  }
  return out;
}

/**
 * Runs the pending migration `name` of `list` on `db` through the runner, capturing what it sends,
 * and lints it; a migration that fails is a finding too (with what it sent until then linted).
 */
export async function lintMigration(db: Knex, list: MigrationList, name: string, squawk: string): Promise<Finding[]> {
  const migration = list.find(([n]) => n === name)?.[1];
  if (!migration) throw new Error(`no migration ${name}`);
  const subject: LintSubject = {
    name,
    phase: migration.phase,
    transactional: migration.config?.transaction !== false,
    notNullChecked: await notNullChecked(db),
  };
  for (const [key, ms] of Object.entries(migration.timeouts ?? {})) {
    if (!Number.isInteger(ms) || ms <= 0) {
      const statement = `export const timeouts = { ${key}: ${ms} }`;
      return [
        {
          migration: name,
          rule: 'timeout-disabled',
          by: 'project',
          message: PROJECT_RULES['timeout-disabled'],
          statement,
        },
      ];
    }
  }
  const sent: SentStatement[] = [];
  let failure: unknown;
  try {
    await migrate(db, { only: name, list, onStatement: (s) => sent.push(s) });
  } catch (err) {
    failure = err;
  }
  const findings = lintStatements(squawk, subject, sent);
  if (failure) {
    const message = `${PROJECT_RULES['migration-failed']} ${failure instanceof Error ? failure.message : String(failure)}`;
    const statement = sent.filter((s) => s.by === 'migration').at(-1)?.sql ?? '(none sent)';
    findings.push({ migration: name, rule: 'migration-failed', by: 'project', message, statement });
  }
  return findings;
}

/**
 * Checks the migrations `names` of `list`: a scratch database on `adminUrl`'s server, migrated in
 * order, each of them linted as it applies; the database is dropped at the end.
 */
export async function checkMigrations(
  adminUrl: string,
  list: MigrationList,
  names: readonly string[],
  squawk: string,
): Promise<Finding[]> {
  const scratch = await scratchDatabase('svc_migration_check', 'the migration check', { adminUrl, keep: false });
  const db = createDb(scratch.url, 2);
  try {
    const findings: Finding[] = [];
    for (const name of list.map(([n]) => n).filter((n) => names.includes(n))) {
      await migrate(db, { list, before: name });
      findings.push(...(await lintMigration(db, list, name, squawk)));
    }
    return findings;
  } finally {
    await db.destroy();
    await scratch.drop();
  }
}

/** The findings of one migration as the check prints them: file, phase, then each rule, message and statement. */
export function formatFindings(name: string, phase: Phase, findings: readonly Finding[]): string {
  const file = `migrations/${name}.ts`;
  if (findings.length === 0) return `${file} (${phase}): ok`;
  const lines = [`${file} (${phase}): ${findings.length} unsafe statement${findings.length === 1 ? '' : 's'}`];
  for (const f of findings) {
    lines.push(`  ${f.rule} (${f.by}): ${f.message}`);
    lines.push(`    statement: ${shown(f.statement)}`);
    if (f.help) lines.push(`    help: ${f.help}`);
    lines.push(
      `    see ${f.by === 'squawk' ? `https://squawkhq.com/docs/${f.rule}` : 'docs/operations.md#migrations-expand-and-contract'}`,
    );
  }
  return lines.join('\n');
}

import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import type { Knex } from 'knex';
import { migrations, type Migration, type MigrationList, type Phase } from '../../migrations';
import { createIndexConcurrently } from '../../src/db/concurrent-index';
import { migrate, type SentStatement } from '../../src/db/migrator';
import { setLogLevel } from '../../src/lib/log';
import {
  checkMigrations,
  type Finding,
  formatFindings,
  lintMigration,
  lintStatements,
  newestRelease,
  newMigrations,
} from '../../scripts/migration-lint';
import { findSquawk } from '../../scripts/toolchain';
import { fixtureMigration } from '../helpers/migrations';
import { ownDatabase } from '../helpers/services';
import { readRunEnv } from '../helpers/stack';

/**
 * The migration check of `npm test` (scripts/migration-lint.ts): each unsafe statement of
 * docs/operations.md ("Migrations: expand and contract") in a migration that exists only here is
 * found and named by its rule; the safe ways of doing the same pass; the check reads which
 * migrations are new from releases.tsv and git.
 */

let own: Awaited<ReturnType<typeof ownDatabase>>;
let db: Knex;
let squawk: string;
/** Every fixture of this file, after this release's migrations (knex wants every applied one listed). */
const fixtures: Array<[string, Migration]> = [];
let list: MigrationList = migrations;

/** Adds a fixture migration to the list (names sort after every real one, in the order made). */
function fixture(
  slug: string,
  phase: Phase,
  work: readonly string[] | ((knex: Knex) => Promise<void>),
  extra: Pick<Migration, 'config' | 'timeouts'> = {},
): string {
  const name = `2099${String(fixtures.length + 1).padStart(10, '0')}_${slug}`;
  fixtures.push(fixtureMigration(name, phase, work, extra));
  list = [...migrations, ...fixtures];
  return name;
}

const noTransaction = { config: { transaction: false } };
const rules = (findings: readonly Finding[]) => [...new Set(findings.map((f) => f.rule))].sort();

beforeAll(async () => {
  setLogLevel('silent');
  squawk = findSquawk();
  own = await ownDatabase();
  db = own.db;
  // Tables with rows, as a migration of a later release finds them.
  await db.raw(`
    CREATE TABLE lint_parent (id bigint PRIMARY KEY);
    INSERT INTO lint_parent SELECT generate_series(1, 10);
    CREATE TABLE lint_subject (id bigint PRIMARY KEY, a text, c integer, d text, e text, f text, g text, h integer
                               CONSTRAINT lint_subject_h_check CHECK (h > 0), i text, k text, l text, n text,
                               parent_id bigint, s text, t text, u text);
    INSERT INTO lint_subject SELECT x, 'a', x, 'd', 'e', 'f', 'g', 1, 'i', NULL, 'l', 'n', 1 + x % 10, 's', 't', 'u'
      FROM generate_series(1, 100) AS x;
    CREATE INDEX lint_subject_b_idx ON lint_subject (a);
    CREATE INDEX lint_subject_g_idx ON lint_subject (g);
    CREATE INDEX lint_subject_u_idx ON lint_subject (u);
    ALTER TABLE lint_subject ADD CONSTRAINT lint_subject_i_check CHECK (i IS NOT NULL) NOT VALID;
    CREATE TABLE lint_empty (id bigint PRIMARY KEY);
    CREATE TABLE lint_rewritten (id bigint PRIMARY KEY);
    CREATE TABLE lint_dropped (id bigint PRIMARY KEY);
    CREATE TABLE lint_dropped_later (id bigint PRIMARY KEY);
    CREATE FUNCTION lint_old() RETURNS integer LANGUAGE sql AS $$ SELECT 1 $$;
    CREATE FUNCTION lint_old_later() RETURNS integer LANGUAGE sql AS $$ SELECT 1 $$;
  `);
});

afterAll(() => own.drop());

describe('the check fails on each unsafe statement, naming its rule', () => {
  const cases: Array<[string, Phase, string[], string[], Pick<Migration, 'config' | 'timeouts'>?]> = [
    // A table rewrite.
    [
      'a column type change',
      'expand',
      ['ALTER TABLE lint_subject ALTER COLUMN c TYPE bigint'],
      ['changing-column-type'],
    ],
    [
      'a column with a volatile default',
      'expand',
      ['ALTER TABLE lint_subject ADD COLUMN v timestamptz DEFAULT clock_timestamp()'],
      ['adding-field-with-default'],
    ],
    ['SET UNLOGGED', 'expand', ['ALTER TABLE lint_rewritten SET UNLOGGED'], ['table-rewrite']],
    // An index built or dropped without CONCURRENTLY on an existing table.
    [
      'an index without CONCURRENTLY',
      'expand',
      ['CREATE INDEX lint_subject_a ON lint_subject (a)'],
      ['require-concurrent-index-creation'],
    ],
    [
      'an index dropped without CONCURRENTLY',
      'contract',
      ['DROP INDEX lint_subject_b_idx'],
      ['require-concurrent-index-deletion'],
    ],
    // NOT NULL without a validated CHECK.
    [
      'SET NOT NULL',
      'contract',
      ['ALTER TABLE lint_subject ALTER COLUMN d SET NOT NULL'],
      ['adding-not-nullable-field'],
    ],
    [
      'a NOT NULL column without a default',
      'expand',
      ['ALTER TABLE lint_empty ADD COLUMN r text NOT NULL'],
      ['adding-required-field'],
    ],
    // Constraints without NOT VALID.
    [
      'a foreign key',
      'expand',
      [
        'ALTER TABLE lint_subject ADD CONSTRAINT lint_subject_parent FOREIGN KEY (parent_id) REFERENCES lint_parent (id)',
      ],
      ['adding-foreign-key-constraint', 'constraint-missing-not-valid'],
    ],
    [
      'a CHECK',
      'expand',
      [`ALTER TABLE lint_subject ADD CONSTRAINT lint_subject_e CHECK (e <> '')`],
      ['constraint-missing-not-valid'],
    ],
    // Drops in an expand migration.
    ['a table dropped', 'expand', ['DROP TABLE lint_dropped'], ['ban-drop-table']],
    ['a column dropped', 'expand', ['ALTER TABLE lint_subject DROP COLUMN f'], ['ban-drop-column']],
    [
      'an index dropped',
      'expand',
      ['DROP INDEX CONCURRENTLY IF EXISTS lint_subject_g_idx'],
      ['ban-drop-index'],
      noTransaction,
    ],
    [
      'a constraint dropped',
      'expand',
      ['ALTER TABLE lint_subject DROP CONSTRAINT lint_subject_h_check'],
      ['ban-drop-constraint'],
    ],
    ['a function dropped', 'expand', ['DROP FUNCTION lint_old()'], ['ban-drop-function']],
    [
      'a VALIDATE',
      'expand',
      ['ALTER TABLE lint_subject VALIDATE CONSTRAINT lint_subject_i_check'],
      ['validate-in-expand'],
    ],
    // A lock or statement timeout turned off.
    [
      'lock_timeout = 0',
      'expand',
      ['SET LOCAL lock_timeout = 0', 'ALTER TABLE lint_subject ADD COLUMN j text'],
      ['timeout-disabled'],
    ],
    [
      'RESET statement_timeout',
      'expand',
      ['RESET statement_timeout', 'CREATE TABLE lint_after_reset (id bigint)'],
      ['timeout-disabled'],
    ],
    [
      'a declared lock timeout of 0',
      'expand',
      ['CREATE TABLE lint_never (id bigint)'],
      ['timeout-disabled'],
      {
        timeouts: { lockMs: 0 },
      },
    ],
    // Rerunnable without a transaction, and no backfill.
    ['a backfill', 'expand', ['UPDATE lint_subject SET k = a'], ['backfill-in-migration']],
    [
      'an index built CONCURRENTLY over an INVALID leftover',
      'expand',
      ['CREATE INDEX CONCURRENTLY IF NOT EXISTS lint_subject_l ON lint_subject (l)'],
      ['concurrent-index-not-rerunnable'],
      noTransaction,
    ],
    [
      'a statement that cannot run twice, without a transaction',
      'expand',
      ['ALTER TABLE lint_subject ADD COLUMN m text'],
      ['prefer-robust-stmts'],
      noTransaction,
    ],
    ['a rename', 'expand', ['ALTER TABLE lint_subject RENAME COLUMN n TO n2'], ['renaming-column']],
  ];

  it.each(cases)('%s (%s)', async (slug, phase, statements, expected, extra = {}) => {
    const name = fixture(slug.replace(/\W+/g, '_'), phase, statements, extra);
    const findings = await lintMigration(db, list, name, squawk);
    expect(rules(findings)).toEqual(expected);
    for (const f of findings) expect(f.migration).toBe(name);
    if (!extra.timeouts) {
      const flagged = findings.filter((f) => expected.includes(f.rule)).map((f) => f.statement);
      expect(statements.some((s) => flagged.includes(s))).toBe(true);
    }
  });

  it('a migration sent without the runner’s timeouts (require-lock-timeout, require-statement-timeout)', () => {
    const subject = { name: 'x', phase: 'expand' as const, transactional: true, notNullChecked: new Set<string>() };
    const sent: SentStatement[] = [{ sql: 'ALTER TABLE lint_subject ADD COLUMN x text', by: 'migration' }];
    expect(rules(lintStatements(squawk, subject, sent))).toEqual(['require-lock-timeout', 'require-statement-timeout']);
  });
});

describe('the safe ways pass', () => {
  it('new columns nullable or with a constant default, constraints NOT VALID, a new table with its index and key', async () => {
    const name = fixture('safe_expand', 'expand', [
      'ALTER TABLE lint_subject ADD COLUMN p text',
      `ALTER TABLE lint_subject ADD COLUMN q text NOT NULL DEFAULT 'x'`,
      'ALTER TABLE lint_subject ADD CONSTRAINT lint_subject_parent_safe FOREIGN KEY (parent_id) REFERENCES lint_parent (id) NOT VALID',
      'ALTER TABLE lint_subject ADD CONSTRAINT lint_subject_s_not_null CHECK (s IS NOT NULL) NOT VALID',
      'CREATE TABLE lint_new (id bigint PRIMARY KEY, parent_id bigint REFERENCES lint_parent (id), v text)',
      'CREATE INDEX lint_new_v ON lint_new (v)',
    ]);
    expect(await lintMigration(db, list, name, squawk)).toEqual([]);
  });

  it('an index built CONCURRENTLY, re-runnably, without a transaction', async () => {
    const work = (knex: Knex) => createIndexConcurrently(knex, 'lint_subject_o', 'lint_subject (a, c)');
    const name = fixture('safe_concurrent_index', 'expand', work, noTransaction);
    // A build that failed left an INVALID index behind (a duplicate under UNIQUE): the next run rebuilds it.
    await db.raw(`UPDATE lint_subject SET k = 'same'`);
    await expect(db.raw('CREATE UNIQUE INDEX CONCURRENTLY lint_subject_o ON lint_subject (k)')).rejects.toThrow();
    expect(await lintMigration(db, list, name, squawk)).toEqual([]);
    const { rows } = await db.raw(
      `SELECT indisvalid AS valid, pg_get_indexdef(indexrelid) AS def FROM pg_index WHERE indexrelid = 'lint_subject_o'::regclass`,
    );
    expect(rows).toEqual([{ valid: true, def: expect.stringContaining('(a, c)') }]);
  });

  it('VALIDATE, then SET NOT NULL over the validated CHECK, in contract migrations', async () => {
    const validate = fixture('safe_validate', 'contract', [
      'ALTER TABLE lint_subject VALIDATE CONSTRAINT lint_subject_parent_safe',
      'ALTER TABLE lint_subject VALIDATE CONSTRAINT lint_subject_s_not_null',
    ]);
    const setNotNull = fixture('safe_set_not_null', 'contract', [
      'ALTER TABLE lint_subject ALTER COLUMN s SET NOT NULL',
      'ALTER TABLE lint_subject DROP CONSTRAINT lint_subject_s_not_null',
    ]);
    expect(await lintMigration(db, list, validate, squawk)).toEqual([]);
    expect(await lintMigration(db, list, setNotNull, squawk)).toEqual([]);
  });

  it('drops in a contract migration', async () => {
    const name = fixture('safe_drops', 'contract', [
      'ALTER TABLE lint_subject DROP COLUMN IF EXISTS t',
      'DROP TABLE IF EXISTS lint_dropped_later',
      'DROP FUNCTION IF EXISTS lint_old_later()',
    ]);
    const index = fixture(
      'safe_drop_index',
      'contract',
      ['DROP INDEX CONCURRENTLY IF EXISTS lint_subject_u_idx'],
      noTransaction,
    );
    expect(await lintMigration(db, list, name, squawk)).toEqual([]);
    expect(await lintMigration(db, list, index, squawk)).toEqual([]);
  });

  it('sends the runner’s timeouts first, so the lint sees them', async () => {
    const name = fixture('safe_sent', 'expand', ['ALTER TABLE lint_subject ADD COLUMN w text']);
    const sent: SentStatement[] = [];
    await migrate(db, { only: name, list, onStatement: (s) => sent.push(s) });
    expect(sent).toEqual([
      { sql: `SET lock_timeout = '1000ms'`, by: 'runner' },
      { sql: `SET statement_timeout = '60000ms'`, by: 'runner' },
      { sql: 'ALTER TABLE lint_subject ADD COLUMN w text', by: 'migration' },
    ]);
  });
});

describe('what npm test checks', () => {
  it('the newest release is the last line of releases.tsv', () => {
    const root = mkdtempSync(join(tmpdir(), 'releases-'));
    writeFileSync(
      join(root, 'releases.tsv'),
      '# comment\nversion\tcommit\tdate\n0.1.0\taaaa\t2026-11-27\n0.2.0\tbbbb\t2026-11-30\n',
    );
    expect(newestRelease(root)).toEqual({ version: '0.2.0', commit: 'bbbb', date: '2026-11-30' });
    rmSync(root, { recursive: true });
  });

  it('new migrations: those the release did not apply (git show of its migrations/index.ts)', () => {
    const release = { version: '0.1.0', commit: 'a3f9257f74b3266c7d027e0c0f939bc45bbc72fc', date: '2026-11-27' };
    expect(newMigrations(migrations, release)).toEqual({
      names: [
        '20261127120000_delivery_tenant_drop',
        '20261127140000_console_accounts',
        '20261127180000_endpoint_watches',
        '20261127190000_console_passkeys',
        '20261128100000_console_inventory',
        '20261201100000_delivery_endpoint_index',
        '20261201100100_console_reauth_invites',
      ],
    });
  });

  it('without the release’s commit, every migration dated on or after its day, and says so', () => {
    const unknown = { version: '0.1.0', commit: '0000000000000000000000000000000000000000', date: '2026-11-26' };
    const { names, note } = newMigrations(migrations, unknown);
    expect(names).toEqual(migrations.map(([n]) => n).filter((n) => n >= '20261126'));
    expect(note).toMatch(
      /^could not read release 0\.1\.0's migrations \(git show 0{40}:migrations\/index\.ts: .*\): every migration dated 2026-11-26 or later counts as new$/,
    );
  });

  it('runs each new migration on a scratch database and names the file, statement and rule', async () => {
    const table = fixture('check_table', 'expand', [
      'CREATE TABLE IF NOT EXISTS lint_check (id bigint PRIMARY KEY, x text)',
      'CREATE INDEX lint_check_x ON lint_check (x)',
    ]);
    const later = fixture('unsafe_later', 'expand', ['CREATE INDEX lint_check_x2 ON lint_check (x)']);
    const scratchList: MigrationList = [
      ...migrations,
      fixtures.find(([n]) => n === table)!,
      fixtures.find(([n]) => n === later)!,
    ];
    const findings = await checkMigrations(
      readRunEnv().adminUrl,
      scratchList,
      ['20261127120000_delivery_tenant_drop', later],
      squawk,
    );
    // The real contract migration passes; the index on a table an earlier migration made does not.
    expect(findings.map((f) => [f.migration, f.rule, f.statement])).toEqual([
      [later, 'require-concurrent-index-creation', 'CREATE INDEX lint_check_x2 ON lint_check (x)'],
    ]);
    expect(formatFindings(later, 'expand', findings).split('\n').slice(0, 3)).toEqual([
      `migrations/${later}.ts (expand): 1 unsafe statement`,
      '  require-concurrent-index-creation (squawk): During normal index creation, table updates are blocked, but reads are still allowed.',
      '    statement: CREATE INDEX lint_check_x2 ON lint_check (x)',
    ]);
  });
});

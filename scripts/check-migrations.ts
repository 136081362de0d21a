import { migrations } from '../migrations';
import { checkMigrations, formatFindings, newestRelease, newMigrations } from './migration-lint';
import { findSquawk } from './toolchain';

/**
 * Part of `npm test`: every migration the newest release (releases.tsv) did not apply is run on a
 * scratch database (on DATABASE_URL's server) migrated up to just before it, and the SQL it sends
 * is linted (scripts/migration-lint.ts). Prints each migration's findings (file, rule, statement)
 * and exits 1 when there is one; 0 at once when no migration is new.
 */
async function main(): Promise<number> {
  const adminUrl = process.env.DATABASE_URL;
  if (!adminUrl) throw new Error('DATABASE_URL is not set (npm test sets it)');
  const release = newestRelease();
  const { names, note } = newMigrations(migrations, release);
  if (note) process.stdout.write(`note: ${note}\n`);
  if (names.length === 0) {
    process.stdout.write(`No migration since release ${release.version}.\n`);
    return 0;
  }
  process.stdout.write(`${names.length} migration(s) since release ${release.version}, linted as they run:\n`);
  const findings = await checkMigrations(adminUrl, migrations, names, findSquawk());
  for (const [name, migration] of migrations.filter(([n]) => names.includes(n))) {
    process.stdout.write(
      `${formatFindings(
        name,
        migration.phase,
        findings.filter((f) => f.migration === name),
      )}\n`,
    );
  }
  return findings.length > 0 ? 1 : 0;
}

main().then(
  (code) => process.exit(code),
  (err: unknown) => {
    process.stderr.write(`migration check failed: ${err instanceof Error ? err.message : String(err)}\n`);
    process.exit(1);
  },
);

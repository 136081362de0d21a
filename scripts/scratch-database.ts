import { Client as PgClient } from 'pg';
import { randomString } from '../src/lib/ids';

/** A database of a script's own on a Postgres server: its name, its URL, and how to drop it. */
export interface ScratchDatabase {
  name: string;
  url: string;
  /** Drops it (unless kept) and closes the admin connection. */
  drop(): Promise<void>;
}

/**
 * Creates `<prefix>_<ms>_<random>` on `adminUrl`'s server (default DATABASE_URL's, which `who` names
 * in its error when unset); `drop()` keeps it when `keep` is set (default: BENCH_KEEP=1).
 */
export async function scratchDatabase(
  prefix: string,
  who: string,
  { adminUrl = process.env.DATABASE_URL, keep = process.env.BENCH_KEEP === '1' } = {},
): Promise<ScratchDatabase> {
  if (!adminUrl) throw new Error(`${who} needs DATABASE_URL (a server to create its database on)`);
  const name = `${prefix}_${Date.now()}_${randomString(6).toLowerCase()}`;
  const admin = new PgClient({ connectionString: adminUrl });
  admin.on('error', () => undefined); // a server shutting down ends it; drop() reports what matters
  await admin.connect();
  await admin.query(`CREATE DATABASE ${name}`);
  const url = new URL(adminUrl);
  url.pathname = `/${name}`;
  return {
    name,
    url: url.toString(),
    async drop() {
      if (!keep) await admin.query(`DROP DATABASE IF EXISTS ${name} WITH (FORCE)`);
      await admin.end();
    },
  };
}

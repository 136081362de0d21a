import type { Knex } from 'knex';

/**
 * Builds index `name` on `definition` (`table (columns) [WHERE …]`) CONCURRENTLY, re-runnably, for
 * a migration with `config.transaction: false`: a build that failed (a lock or statement timeout,
 * a duplicate under UNIQUE) leaves an INVALID index behind, which `IF NOT EXISTS` would keep, so
 * such a copy is dropped first. Writes go on throughout.
 */
export async function createIndexConcurrently(
  knex: Knex,
  name: string,
  definition: string,
  { unique = false }: { unique?: boolean } = {},
): Promise<void> {
  const { rows } = await knex.raw(`SELECT 1 FROM pg_index WHERE indexrelid = to_regclass(?) AND NOT indisvalid`, [
    name,
  ]);
  if (rows.length > 0) {
    // The failed build's leftover, which no query uses.
    await knex.raw(`-- squawk-ignore ban-drop-index\nDROP INDEX CONCURRENTLY IF EXISTS ${name}`);
  }
  await knex.raw(`CREATE ${unique ? 'UNIQUE ' : ''}INDEX CONCURRENTLY IF NOT EXISTS ${name} ON ${definition}`);
}

import type { Db } from './knex';

/** The part of a pg client this module uses. */
interface PgConnection {
  query(config: {
    name?: string;
    text: string;
    values: unknown[];
  }): Promise<{ rows: unknown[]; rowCount: number | null }>;
}

/** The part of knex's client that hands out its pool's connections (a transaction's own inside one). */
interface ConnectionSource {
  acquireConnection(): Promise<PgConnection>;
  releaseConnection(connection: PgConnection): Promise<unknown>;
}

/**
 * Runs `text` (with `$n` parameters) as the named prepared statement `name` on a connection of
 * `db`, the transaction's own when `db` is one. Postgres then plans it once per connection and,
 * after five runs, keeps a generic plan: for statements on the day-partitioned event log, whose
 * planning over every partition costs ten times their execution, that is most of their CPU.
 * One name must always carry the same text; an empty name runs it unnamed.
 */
export async function preparedQuery<Row>(
  db: Db,
  name: string,
  text: string,
  values: unknown[],
): Promise<{ rows: Row[]; rowCount: number }> {
  const source = db.client as unknown as ConnectionSource;
  const connection = await source.acquireConnection();
  try {
    const result = await connection.query(name ? { name, text, values } : { text, values });
    return { rows: result.rows as Row[], rowCount: result.rowCount ?? 0 };
  } finally {
    await source.releaseConnection(connection);
  }
}

/** Runs `text` (with `$n` parameters) unnamed, planned with its values on each call (see preparedQuery). */
export function unpreparedQuery<Row>(
  db: Db,
  text: string,
  values: unknown[],
): Promise<{ rows: Row[]; rowCount: number }> {
  return preparedQuery<Row>(db, '', text, values);
}

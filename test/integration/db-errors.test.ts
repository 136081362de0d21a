import { createDb, type Db } from '../../src/db/knex';
import { registry } from '../../src/telemetry/metrics';
import { readRunEnv } from '../helpers/stack';

/**
 * svc_db_errors_total: every error Postgres answers is counted by SQLSTATE (the full code for the
 * classes that say the server is in trouble, the class otherwise), in and out of transactions;
 * 53100 disk_full, what PostgresDiskFull reads, is there at 0 before the first one.
 */
let db: Db;
beforeAll(() => {
  db = createDb(readRunEnv().databaseUrl, 2);
});
afterAll(() => db.destroy());

async function count(sqlstate: string): Promise<number | undefined> {
  const metric = await registry.getSingleMetric('svc_db_errors_total')!.get();
  return metric.values.find((v) => v.labels.sqlstate === sqlstate)?.value;
}

/** A statement Postgres answers with `errcode` (a condition name), as a full disk or a duplicate would. */
const raise = (errcode: string) =>
  `DO $$ BEGIN RAISE EXCEPTION 'could not extend file' USING ERRCODE = '${errcode}'; END $$`;

describe('svc_db_errors_total', () => {
  it('has 53100 at 0 before any error', async () => {
    expect(await count('53100')).toBe(0);
  });

  it('counts disk_full by its SQLSTATE, in and out of a transaction', async () => {
    await expect(db.raw(raise('disk_full'))).rejects.toMatchObject({ code: '53100' });
    await expect(db.transaction((trx) => trx.raw(raise('disk_full')))).rejects.toMatchObject({ code: '53100' });
    expect(await count('53100')).toBe(2);
  });

  it('counts the trouble classes by their code and other classes by class', async () => {
    await expect(db.raw(raise('unique_violation'))).rejects.toMatchObject({ code: '23505' });
    await expect(db.raw(raise('too_many_connections'))).rejects.toMatchObject({ code: '53300' });
    expect(await count('23000')).toBe(1);
    expect(await count('23505')).toBeUndefined();
    expect(await count('53300')).toBe(1);
  });
});

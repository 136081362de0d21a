import { loadSettings, requireDatabaseUrl } from '../config';
import { createDb, migrateLatest } from '../db/knex';
import { log } from '../lib/log';

/** `npm run migrate`: applies pending forward-only migrations, then exits. */
async function main(): Promise<void> {
  const settings = loadSettings();
  const db = createDb(requireDatabaseUrl(settings), 2);
  try {
    const applied = await migrateLatest(db);
    log.info('migrations applied', { count: applied.length, applied });
  } finally {
    await db.destroy();
  }
}

main().catch((err) => {
  log.error('migration failed', { error: err });
  process.exit(1);
});

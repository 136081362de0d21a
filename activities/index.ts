import type { Db } from '../src/db/knex';
import type { Clock } from '../src/lib/clock';
import { createJanitorActivities } from './janitor';

export interface ActivityDeps {
  db: Db;
  clock: Clock;
}

/** Every activity the worker registers, built from injected dependencies. */
export function createActivities(deps: ActivityDeps) {
  return {
    ...createJanitorActivities(deps),
  };
}

export type Activities = ReturnType<typeof createActivities>;

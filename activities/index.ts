import type { Db } from '../src/db/knex';
import type { Clock } from '../src/lib/clock';
import { createJanitorActivities } from './janitor';
import { createSessionActivities } from './session';

export interface ActivityDeps {
  db: Db;
  clock: Clock;
  /** The hosted page's base address, for session `url`s in event payloads. */
  publicBaseUrl: string;
}

/** Every activity the worker registers, built from injected dependencies. */
export function createActivities(deps: ActivityDeps) {
  return {
    ...createJanitorActivities(deps),
    ...createSessionActivities(deps),
  };
}

export type Activities = ReturnType<typeof createActivities>;

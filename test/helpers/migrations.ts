import type { Knex } from 'knex';
import type { Migration, Phase } from '../../migrations';

/**
 * A migration that exists only in a test: `up` runs `work` (statements one by one, or a function),
 * with the phase, transaction setting and timeouts given.
 */
export function fixtureMigration(
  name: string,
  phase: Phase,
  work: readonly string[] | ((knex: Knex) => Promise<void>),
  extra: Pick<Migration, 'config' | 'timeouts'> = {},
): [string, Migration] {
  const up =
    typeof work === 'function'
      ? work
      : async (knex: Knex) => {
          for (const sql of work) await knex.raw(sql);
        };
  return [
    name,
    {
      phase,
      up,
      down: async () => {
        throw new Error('forward-only');
      },
      ...extra,
    },
  ];
}

import type { Db } from '../../src/db/knex';
import { KeyUse, LAST_USED_RESOLUTION_MS } from '../../src/keys/last-used';

/** A knex stand-in that records each UPDATE it is asked for, or fails every one. */
function fakeDb(opts: { fail?: boolean } = {}) {
  const updates: Array<{ table: string; id: unknown; set: unknown }> = [];
  const db = ((table: string) => {
    let id: unknown;
    const builder = {
      where: (w: { id: unknown }) => ((id = w.id), builder),
      andWhere: () => builder,
      update: async (set: unknown) => {
        if (opts.fail) throw new Error('connection refused');
        updates.push({ table, id, set });
        return 1;
      },
    };
    return builder;
  }) as unknown as Db;
  return { db, updates };
}

describe('keys’ "last used" (KeyUse)', () => {
  const t0 = Date.parse('2026-12-01T10:00:00.000Z');

  it('writes a key’s first use, then nothing more from this process within the minute', async () => {
    const use = new KeyUse('partner_keys');
    const { db, updates } = fakeDb();
    use.record(db, 'key_a', new Date(t0));
    use.record(db, 'key_a', new Date(t0 + 1));
    use.record(db, 'key_a', new Date(t0 + LAST_USED_RESOLUTION_MS - 1));
    await use.settled();
    expect(updates).toEqual([{ table: 'partner_keys', id: 'key_a', set: { last_used_at: new Date(t0) } }]);
  });

  it('writes again once a minute has passed, and for each key on its own', async () => {
    const use = new KeyUse('checkout_keys');
    const { db, updates } = fakeDb();
    use.record(db, 'key_a', new Date(t0));
    use.record(db, 'key_b', new Date(t0 + 10));
    use.record(db, 'key_a', new Date(t0 + LAST_USED_RESOLUTION_MS));
    await use.settled();
    expect(updates.map((u) => [u.id, (u.set as { last_used_at: Date }).last_used_at.getTime() - t0])).toEqual([
      ['key_a', 0],
      ['key_b', 10],
      ['key_a', LAST_USED_RESOLUTION_MS],
    ]);
  });

  it('never throws into the request: a failed write is logged, and retried only a minute later', async () => {
    const use = new KeyUse('partner_keys');
    const down = fakeDb({ fail: true });
    expect(() => use.record(down.db, 'key_a', new Date(t0))).not.toThrow();
    await expect(use.settled()).resolves.toBeUndefined();
    expect(use.due('key_a', t0 + 1)).toBe(false);
    expect(use.due('key_a', t0 + LAST_USED_RESOLUTION_MS)).toBe(true);
  });
});

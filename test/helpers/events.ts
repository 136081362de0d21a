/** Events as the tests look them up: about one object, payloads decoded as the API decodes them. */
import type { Db } from '../../src/db/knex';
import { decodeEventRow } from '../../src/checkout/event-payload';
import { idTime } from '../../src/lib/ids';

/**
 * The events recorded about object `objectId` (a session, refund, …), of `type` when given,
 * oldest first, with `data_object` decoded. Payloads are stored compressed (no SQL filter can read
 * them), so the object is matched here, among the events since the object's id was made.
 */
export async function eventsAbout(db: Db, objectId: string, type?: string): Promise<Array<Record<string, any>>> {
  const since = idTime(objectId);
  const query = db('events').orderBy('created_at').orderBy('id');
  if (type) query.where({ type });
  if (since !== null) query.where('created_at', '>=', new Date(since - 60_000));
  const rows: Array<Record<string, any>> = await query;
  return rows.map(decodeEventRow).filter((e) => (e.data_object as { id?: string } | null)?.id === objectId);
}

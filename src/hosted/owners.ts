import type { Db } from '../db/knex';
import type { KeyMode } from '../keys/keys';

/**
 * Whose page is this: the merchant and mode that own a session code or an attempt id, and the
 * session's locale. The page needs them to pick the publishable key (and the language of a 404 or
 * 410 screen) before it can ask the public routes anything; it reads nothing else directly.
 */
export interface Owner {
  merchant_id: string;
  mode: KeyMode;
  locale: string;
}

export const sessionOwner = (db: Db, code: string): Promise<Owner | undefined> =>
  db('checkout_sessions').where({ code }).first('merchant_id', 'mode', 'locale');

export const attemptOwner = (db: Db, attemptId: string): Promise<Owner | undefined> =>
  db('payment_attempts as a')
    .join('checkout_sessions as s', 's.id', 'a.session_id')
    .where('a.id', attemptId)
    .first('a.merchant_id', 'a.mode', 's.locale');

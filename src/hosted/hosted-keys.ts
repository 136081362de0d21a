import type { Db } from '../db/knex';
import { generateKey, KeyMode } from '../keys/keys';
import type { SecretCipher } from '../webhooks/secret-crypto';

/** The hosted page's publishable keys: one per merchant and mode, made on first need. */
export interface HostedKeys {
  /** The plaintext key for `merchantId` in `mode` (made now when there is none, or it was revoked). */
  forMerchant(merchantId: string, mode: KeyMode): Promise<string>;
}

/** Binds a ciphertext to its row, so one row's ciphertext never decrypts as another's (or as a webhook secret). */
const associatedData = (merchantId: string, mode: KeyMode, keyId: string) =>
  `hosted_page_key:${merchantId}:${mode}:${keyId}`;

/**
 * Hosted keys in `hosted_page_keys`: an ordinary publishable key in `checkout_keys` (hash only, so
 * it authenticates like any other and the operator can revoke it) whose plaintext is kept
 * encrypted with the service's secret key. A revoked key is replaced on the next page load.
 */
export function hostedKeys(db: Db, cipher: SecretCipher): HostedKeys {
  const current = (q: Db, merchantId: string, mode: KeyMode) =>
    q('hosted_page_keys as h')
      .join('checkout_keys as k', 'k.id', 'h.key_id')
      .where({ 'h.merchant_id': merchantId, 'h.mode': mode })
      .whereNull('k.revoked_at')
      .first<{ key_id: string; key_ciphertext: string } | undefined>('h.key_id', 'h.key_ciphertext');

  async function create(merchantId: string, mode: KeyMode): Promise<void> {
    await db.transaction(async (trx) => {
      // Concurrent first loads queue here, so one key is made (the lock leaves foreign-key checks alone).
      const merchant = await trx('merchants').where({ id: merchantId }).forNoKeyUpdate().first('id');
      if (!merchant) throw new Error(`no merchant ${merchantId}`);
      if (await current(trx, merchantId, mode)) return;
      const { key, keyId, secretHash } = generateKey('pk', mode);
      await trx('checkout_keys').insert({
        id: keyId,
        merchant_id: merchantId,
        mode,
        type: 'publishable',
        secret_hash: secretHash,
        scopes: [],
      });
      await trx('hosted_page_keys')
        .insert({
          merchant_id: merchantId,
          mode,
          key_id: keyId,
          key_ciphertext: cipher.encrypt(key, associatedData(merchantId, mode, keyId)),
          created_at: trx.fn.now(),
        })
        .onConflict(['merchant_id', 'mode'])
        .merge(['key_id', 'key_ciphertext', 'created_at']);
    });
  }

  return {
    async forMerchant(merchantId, mode) {
      let row = await current(db, merchantId, mode);
      if (!row) {
        await create(merchantId, mode);
        row = await current(db, merchantId, mode);
        if (!row) throw new Error('the hosted page key was not stored');
      }
      return cipher.decrypt(row.key_ciphertext, associatedData(merchantId, mode, row.key_id));
    },
  };
}

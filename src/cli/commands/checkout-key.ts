import { checkoutScopes } from '../../keys/scopes';
import { createCheckoutKey, revokeCheckoutKey } from '../../ops/checkout-keys';
import { OpsError } from '../../ops/errors';
import type { CommandTable } from '../command';
import { scopeList } from '../scopes';

/** `checkout-key …` */
export const checkoutKeyCommands: CommandTable = {
  'checkout-key create': {
    flags: { merchant: 'value', mode: 'value', type: 'value', scopes: 'value' },
    run: (f, { db, settings }) => {
      const scopes = f.optional('scopes');
      const mode = f.oneOf('mode', ['test', 'live']);
      // A live key makes the API and the worker refuse to start without a secret key of their own.
      if (mode === 'live' && !settings.WEBHOOK_SECRET_KEY) {
        throw new OpsError(
          'webhook_secret_key_required',
          'set WEBHOOK_SECRET_KEY (openssl rand -hex 32) before creating live keys: the development key is public',
        );
      }
      return createCheckoutKey(db, {
        merchantId: f.required('merchant'),
        mode,
        type: f.oneOf('type', ['secret', 'publishable']),
        scopes: scopes === undefined ? undefined : scopeList(scopes, checkoutScopes),
      });
    },
  },
  'checkout-key revoke': {
    flags: { 'key-id': 'value' },
    run: (f, { db }) => revokeCheckoutKey(db, f.required('key-id')),
  },
};

import { checkoutScopes } from '../../keys/scopes';
import { createCheckoutKey, revokeCheckoutKey } from '../../ops/checkout-keys';
import type { CommandTable } from '../command';
import { scopeList } from '../scopes';

/** `checkout-key …` */
export const checkoutKeyCommands: CommandTable = {
  'checkout-key create': {
    flags: { merchant: 'value', mode: 'value', type: 'value', scopes: 'value' },
    run: (f, { db }) => {
      const scopes = f.optional('scopes');
      return createCheckoutKey(db, {
        merchantId: f.required('merchant'),
        mode: f.oneOf('mode', ['test', 'live']),
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

import { partnerScopes } from '../../keys/scopes';
import { createPartnerKey, revokePartnerKey, setPartnerKeyScopes } from '../../ops/partner-keys';
import type { CommandTable } from '../command';
import { scopeList } from '../scopes';

/** `partner-key …` */
export const partnerKeyCommands: CommandTable = {
  'partner-key create': {
    flags: { seller: 'value', env: 'value', scopes: 'value' },
    run: (f, { db }) =>
      createPartnerKey(db, {
        sellerId: f.required('seller'),
        env: f.oneOf('env', ['test', 'live']),
        scopes: scopeList(f.required('scopes'), partnerScopes),
      }),
  },
  'partner-key revoke': {
    flags: { 'key-id': 'value' },
    run: (f, { db }) => revokePartnerKey(db, f.required('key-id')),
  },
  'partner-key set-scopes': {
    flags: { 'key-id': 'value', scopes: 'value' },
    run: (f, { db }) => setPartnerKeyScopes(db, f.required('key-id'), scopeList(f.required('scopes'), partnerScopes)),
  },
};

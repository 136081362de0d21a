import { createMerchant, setMerchantBranding, setMerchantSuspended } from '../../ops/merchants';
import { splitList } from '../args';
import type { CommandTable } from '../command';

/** `merchant …` */
export const merchantCommands: CommandTable = {
  'merchant create': {
    flags: {
      name: 'value',
      'return-hosts': 'value',
      'contact-email': 'value',
      methods: 'value',
      'test-merchant': 'boolean',
    },
    run: (f, { db }) =>
      createMerchant(db, {
        name: f.required('name'),
        returnHosts: splitList(f.required('return-hosts')),
        contactEmail: f.optional('contact-email'),
        methods: f.list('methods'),
        testMerchant: f.boolean('test-merchant'),
      }),
  },
  'merchant suspend': {
    flags: { merchant: 'value' },
    run: (f, { db }) => setMerchantSuspended(db, f.required('merchant'), true),
  },
  'merchant set-branding': {
    flags: { merchant: 'value', 'display-name': 'value', 'logo-url': 'value', accent: 'value' },
    run: (f, { db }) =>
      setMerchantBranding(db, f.required('merchant'), {
        displayName: f.optional('display-name'),
        logoUrl: f.optional('logo-url'),
        accent: f.optional('accent'),
      }),
  },
  'merchant unsuspend': {
    flags: { merchant: 'value' },
    run: (f, { db }) => setMerchantSuspended(db, f.required('merchant'), false),
  },
};

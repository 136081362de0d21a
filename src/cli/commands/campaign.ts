import { endCampaign, startCampaign } from '../../ops/pricing';
import type { CommandTable } from '../command';

/** `campaign …`: markdown campaigns on one variant. */
export const campaignCommands: CommandTable = {
  'campaign start': {
    flags: { seller: 'value', sku: 'value', percent: 'value', label: 'value' },
    run: (f, { db }) =>
      startCampaign(db, {
        sellerId: f.required('seller'),
        sku: f.required('sku'),
        percent: f.integer('percent'),
        label: f.required('label'),
      }),
  },
  'campaign end': {
    flags: { seller: 'value', sku: 'value' },
    run: (f, { db }) => endCampaign(db, { sellerId: f.required('seller'), sku: f.required('sku') }),
  },
};

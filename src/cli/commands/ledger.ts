import { listLedger } from '../../ops/ledger';
import type { CommandTable } from '../command';

/** `ledger …`: the seller's books as stock adjustments posted them. */
export const ledgerCommands: CommandTable = {
  'ledger list': {
    flags: { seller: 'value', limit: 'value' },
    run: (f, { db }) => listLedger(db, { sellerId: f.required('seller'), limit: f.optionalInteger('limit') }),
  },
};

import { createSeller } from '../../ops/sellers';
import type { CommandTable } from '../command';

/** `seller …` */
export const sellerCommands: CommandTable = {
  'seller create': {
    flags: { name: 'value', locations: 'value' },
    run: (f, { db }) => createSeller(db, { name: f.required('name'), locations: f.optionalInteger('locations') }),
  },
};

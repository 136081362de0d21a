import { setStockLevel } from '../../ops/stock';
import type { CommandTable } from '../command';

/** `stock …` */
export const stockCommands: CommandTable = {
  'stock set': {
    flags: { seller: 'value', sku: 'value', location: 'value', level: 'value' },
    run: (f, { db }) =>
      setStockLevel(db, {
        sellerId: f.required('seller'),
        sku: f.required('sku'),
        locationId: f.required('location'),
        level: f.required('level'),
      }),
  },
};

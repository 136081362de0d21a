import { setFxRate } from '../../ops/fx';
import type { CommandTable } from '../command';

/** `fx …` */
export const fxCommands: CommandTable = {
  'fx set': {
    flags: { from: 'value', to: 'value', rate: 'value' },
    run: (f, { db }) => setFxRate(db, { from: f.required('from'), to: f.required('to'), rate: f.required('rate') }),
  },
};

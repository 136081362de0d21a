import { createDemo } from '../../ops/demo';
import type { CommandTable } from '../command';

/** `demo` */
export const demoCommands: CommandTable = {
  demo: {
    flags: {},
    run: (_f, { db, settings }) => createDemo(db, settings),
  },
};

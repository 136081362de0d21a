import { listOutbox } from '../../ops/outbox';
import type { CommandTable } from '../command';

/** `outbox …` */
export const outboxCommands: CommandTable = {
  'outbox list': {
    flags: { kind: 'value', limit: 'value' },
    run: (f, { db }) => listOutbox(db, { kind: f.optional('kind'), limit: f.optionalInteger('limit') }),
  },
};

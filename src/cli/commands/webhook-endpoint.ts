import { reconcileUndelivered, setEndpointConcurrency } from '../../ops/webhook-endpoints';
import type { CommandTable } from '../command';

/** `webhook-endpoint …` */
export const webhookEndpointCommands: CommandTable = {
  'webhook-endpoint set-concurrency': {
    flags: { endpoint: 'value', 'max-in-flight': 'value' },
    run: (f, { db }) => setEndpointConcurrency(db, f.required('endpoint'), f.integer('max-in-flight')),
  },
  'webhook-endpoint reconcile-undelivered': {
    flags: {},
    run: (_f, { db }) => reconcileUndelivered(db),
  },
};

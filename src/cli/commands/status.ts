import { readStatus } from '../../ops/status';
import type { CommandTable } from '../command';

/** `status`: the figures an on-call looks at first (the same queries as the metrics' backlog gauges). */
export const statusCommands: CommandTable = {
  status: {
    flags: {},
    run: (_f, deps) => readStatus(deps.db, deps.temporal, deps.settings.TEMPORAL_NAMESPACE),
  },
};

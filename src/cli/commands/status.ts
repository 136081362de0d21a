import { readStatus } from '../../ops/status';
import type { CommandTable } from '../command';

/**
 * `status [--process <metrics url>]…`: the figures an on-call looks at first (the same queries as
 * the metrics' backlog gauges), Postgres and Temporal as this command reaches them, and each given
 * process's own view (its /readyz and probe gauges).
 */
export const statusCommands: CommandTable = {
  status: {
    flags: { process: 'repeated' },
    run: (flags, deps) =>
      readStatus(deps.db, deps.temporal, {
        namespace: deps.settings.TEMPORAL_NAMESPACE,
        postgresDeadlineMs: deps.settings.DB_QUERY_TIMEOUT_MS,
        temporalDeadlineMs: deps.settings.TEMPORAL_CALL_TIMEOUT_MS,
        processes: flags.repeated('process'),
      }),
  },
};

import { hostname } from 'node:os';
import { BUILD_ID_PATTERN } from '../../config';
import { OpsError } from '../../ops/errors';
import { promoteBuild, PROMOTE_WAIT_MS, readReleaseStatus } from '../../ops/release';
import { withDeadline } from '../../telemetry/metrics';
import { buildIdOf, releaseTargetOf, TEMPORAL_CALL_TIMEOUT_MS } from '../../temporal/deployment';
import type { CliDeps, CommandTable } from '../command';

/** The Temporal connection, or `temporal_unavailable` when there is none or it does not answer in time. */
async function temporalConnection(deps: CliDeps) {
  if (!deps.temporal) throw new OpsError('temporal_unavailable', 'this command needs a Temporal connection');
  try {
    return (await withDeadline('connecting to Temporal', TEMPORAL_CALL_TIMEOUT_MS, deps.temporal)).connection;
  } catch (err) {
    throw new OpsError('temporal_unavailable', err instanceof Error ? err.message : String(err));
  }
}

/** `release …`: the Worker Deployment side of a release (docs/workflows.md, "Worker Deployment Versioning"). */
export const releaseCommands: CommandTable = {
  'release promote': {
    flags: { 'build-id': 'value', ramp: 'value', wait: 'value' },
    async run(f, deps) {
      const buildId = f.optional('build-id') ?? buildIdOf(deps.settings);
      if (!BUILD_ID_PATTERN.test(buildId)) {
        throw new OpsError(
          'invalid_flag',
          '--build-id must be 1-255 characters without spaces or quotes, not starting with __',
        );
      }
      const ramp = f.optionalInteger('ramp');
      if (ramp !== undefined && (ramp < 1 || ramp > 99)) {
        throw new OpsError(
          'invalid_flag',
          '--ramp must be a percentage from 1 to 99 (without --ramp the build is made current)',
        );
      }
      const waitSeconds = f.optionalInteger('wait') ?? PROMOTE_WAIT_MS / 1000;
      if (waitSeconds < 0 || waitSeconds > 600) throw new OpsError('invalid_flag', '--wait must be 0 to 600 seconds');
      return promoteBuild(await temporalConnection(deps), releaseTargetOf(deps.settings), {
        buildId,
        rampPercent: ramp,
        waitMs: waitSeconds * 1000,
        identity: `ops release promote (${hostname()})`,
      });
    },
  },
  'release status': {
    flags: {},
    run: async (_f, deps) => readReleaseStatus(await temporalConnection(deps), releaseTargetOf(deps.settings)),
  },
};

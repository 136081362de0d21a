/**
 * The worker's side of Worker Deployment Versioning: the options both Worker instances of a
 * process declare, the start-up line and metric naming the build, and the first promotion of a
 * brand-new install (docs/workflows.md, "Worker Deployment Versioning").
 */
import type { WorkerDeploymentVersion } from '@temporalio/common';
import type { WorkerOptions } from '@temporalio/worker';
import { log } from '../lib/log';
import { OpsError } from '../ops/errors';
import { promoteBuild } from '../ops/release';
import { setBuildInfo } from '../telemetry/metrics';
import {
  describeDeployment,
  isUnimplemented,
  releaseVersion,
  type DeploymentState,
  type Poller,
  type ReleaseTarget,
  type TemporalConnection,
} from '../temporal/deployment';
import { defaultVersioningBehavior } from '../temporal/versioning';

/** How long a starting worker waits for the server to register its build before it decides on a first promotion. */
export const FIRST_PROMOTION_WAIT_MS = 30_000;

/** `workerDeploymentOptions` for `version`; none (an unversioned worker) for null. */
export function workerDeploymentOptions(
  version: WorkerDeploymentVersion | null,
): Pick<WorkerOptions, 'workerDeploymentOptions'> {
  if (!version) return {};
  return { workerDeploymentOptions: { version, useWorkerVersioning: true, defaultVersioningBehavior } };
}

/** Logs the deployment version this process's workers declare and exports it as `svc_build_info`. */
export function announceDeploymentVersion(version: WorkerDeploymentVersion | null, taskQueue: string): void {
  setBuildInfo({ version: releaseVersion, build_id: version?.buildId ?? 'unversioned' });
  if (version) {
    log.info('worker deployment version', {
      deployment: version.deploymentName,
      build_id: version.buildId,
      release: releaseVersion,
      task_queue: taskQueue,
      node: process.version,
    });
  } else {
    log.info('worker unversioned (TEMPORAL_WORKER_VERSIONING=off)', {
      release: releaseVersion,
      task_queue: taskQueue,
      node: process.version,
    });
  }
}

/** What a starting worker did about promotion. */
export type FirstPromotion =
  | { outcome: 'promoted'; reason?: never }
  | { outcome: 'already_current'; reason?: never }
  | { outcome: 'left_to_operator' | 'not_registered' | 'unsupported' | 'failed'; reason: string };

/**
 * Why a deployment is not brand-new, or null when it is: a build is current or ramping, or an
 * unversioned worker (the release before) polls the task queues. Only a brand-new one is promoted
 * by a worker; every other promotion is the operator's `ops release promote`.
 */
export function notFresh(state: DeploymentState | null, pollers: readonly Poller[]): string | null {
  if (state?.current) return `build ${state.current} is current`;
  if (state?.ramping) return `build ${state.ramping.buildId} is ramping`;
  const unversioned = pollers.filter((p) => p.live && p.buildId === null);
  if (unversioned.length > 0) {
    const who = [...new Set(unversioned.map((p) => p.identity))].join(', ');
    return `unversioned workers poll the task queues (${who})`;
  }
  return null;
}

/**
 * At start, once the server lists this worker's build: makes it current if the deployment is
 * brand-new (`notFresh`), so the first workflows of a new install never wait for a promotion
 * nobody runs. Never throws: whatever happens is logged and returned.
 */
export async function promoteIfFresh(
  connection: TemporalConnection,
  target: ReleaseTarget,
  buildId: string,
  identity: string,
  waitMs = FIRST_PROMOTION_WAIT_MS,
): Promise<FirstPromotion> {
  const fields = { deployment: target.deploymentName, build_id: buildId };
  const decided = await decide();
  if (decided.outcome === 'promoted') log.info('promoted this build: the deployment was brand-new', fields);
  else if (decided.outcome === 'already_current') log.info('this build is current', fields);
  else if (decided.outcome === 'left_to_operator') {
    log.info('this build waits for `npm run ops -- release promote`', { ...fields, reason: decided.reason });
  } else if (decided.outcome === 'unsupported') {
    log.warn('the Temporal server has no Worker Deployments: set TEMPORAL_WORKER_VERSIONING=off', fields);
  } else log.warn('first promotion not done', { ...fields, outcome: decided.outcome, reason: decided.reason });
  return decided;

  async function decide(): Promise<FirstPromotion> {
    try {
      const promoted = await promoteBuild(connection, target, { buildId, waitMs, identity, declineIf: notFresh });
      return { outcome: promoted.changed ? 'promoted' : 'already_current' };
    } catch (err) {
      if (isUnimplemented(err) || (err instanceof OpsError && err.code === 'versioning_unsupported')) {
        return { outcome: 'unsupported', reason: String(err) };
      }
      if (err instanceof OpsError && err.code === 'promotion_declined') {
        return { outcome: 'left_to_operator', reason: err.message };
      }
      if (err instanceof OpsError && err.code === 'build_not_polling') {
        return { outcome: 'not_registered', reason: err.message };
      }
      if (err instanceof OpsError && err.code === 'deployment_changed') {
        // Another worker promoted meanwhile (the same build, when several start at once).
        const state = await describeDeployment(connection, target).catch(() => null);
        if (state?.current === buildId) return { outcome: 'already_current' };
        return { outcome: 'left_to_operator', reason: err.message };
      }
      return { outcome: 'failed', reason: err instanceof Error ? err.message : String(err) };
    }
  }
}

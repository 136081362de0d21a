/**
 * Each workflow type's Worker Deployment versioning behaviour, set in its workflow file with
 * `setWorkflowOptions` (workflow code imports this module, so values only, no I/O). The reasons
 * are in docs/workflows.md, "Worker Deployment Versioning"; a type missing here fails a unit test.
 *
 * - AUTO_UPGRADE: the run moves to the current build at its next workflow task, so the new code
 *   must replay its history (patches and `npm run replay` keep that true).
 * - PINNED: the run stays on the build it started on until it ends; the old build's workers must
 *   run until `ops release status` says it is drained.
 */
import type { VersioningBehavior } from '@temporalio/common';

export const versioningBehaviors = {
  /** Lives 5 minutes to 24 hours plus an attempt of up to 24 hours: one build per deploy cannot be kept that long. */
  sessionWorkflow: 'AUTO_UPGRADE',
  /** Continues as new for ever, and an idle endpoint's run waits on a signal with no end: it would pin a build for ever. */
  endpointDeliveryWorkflow: 'AUTO_UPGRADE',
  /** The old type: it moves to `endpointDeliveryWorkflow` at its next task, which only a newer build can do. */
  deliveryWorkflow: 'AUTO_UPGRADE',
  /** Runs for ever (continues as new every 200 sweeps). */
  janitorWorkflow: 'AUTO_UPGRADE',
  /** Money movement runs start to finish on the code (and the activity code) it started with. */
  refundWorkflow: 'PINNED',
} as const satisfies Record<string, VersioningBehavior>;

/**
 * What a worker reports for a workflow type that declares none: PINNED, the safe side (the run
 * keeps its build busy, which `ops release status` shows) until the type is added above.
 */
export const defaultVersioningBehavior: VersioningBehavior = 'PINNED';

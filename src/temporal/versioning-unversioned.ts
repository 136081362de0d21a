/**
 * What `versioning.ts` becomes in the workflow bundle of an unversioned worker
 * (TEMPORAL_WORKER_VERSIONING=off; `createWorker` swaps the module): no type declares a behaviour,
 * since a server refuses a workflow task completed with one by a worker that declares no deployment.
 */
import type { VersioningBehavior } from '@temporalio/common';
import type { versioningBehaviors as declared } from './versioning';

export const versioningBehaviors: Record<keyof typeof declared, VersioningBehavior | undefined> = {
  sessionWorkflow: undefined,
  endpointDeliveryWorkflow: undefined,
  deliveryWorkflow: undefined,
  janitorWorkflow: undefined,
  refundWorkflow: undefined,
};

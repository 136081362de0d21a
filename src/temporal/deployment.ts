/**
 * Worker Deployment Versioning, what the worker, `npm start` and the ops CLI share: the deployment
 * version this process's workers declare, the task queues a build must serve, and reads of the
 * deployment's routing, its pollers and its running workflows, each with a deadline.
 * docs/workflows.md, "Worker Deployment Versioning", says how a release uses them.
 */
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { status as grpcStatus } from '@grpc/grpc-js';
import type { WorkerDeploymentVersion } from '@temporalio/common';
import { optionalTsToDate } from '@temporalio/common/lib/time';
import { temporal } from '@temporalio/proto';
import type { Settings } from '../config';
import { webhookActivityQueue } from './delivery';
import { TEMPORAL_CALL_TIMEOUT_MS } from './deadlines';

/** The release version in package.json: the default build id. */
export const releaseVersion: string = (
  JSON.parse(readFileSync(join(__dirname, '..', '..', 'package.json'), 'utf8')) as { version: string }
).version;

/** Every Temporal call here answers within this, or fails (the API's default call deadline). */
export { TEMPORAL_CALL_TIMEOUT_MS };
/**
 * A poller counts as live when the server saw it this recently: an idle worker's long poll is
 * renewed every 60 s, and the server lists a stopped one for 5 minutes more (PollerHistoryTTL).
 */
export const POLLER_LIVE_WINDOW_MS = 90_000;
/**
 * How long after a build stops being current (or ramping) a zero count of runs pinned to it is
 * believed: a run whose first workflow task it took just before (a task times out after 10 s)
 * shows its build in visibility only once that task completes.
 */
export const DRAIN_SETTLE_MS = 15_000;

/** The slice of a client or worker connection these reads use (a `Connection` or a `NativeConnection`). */
export interface TemporalConnection {
  readonly workflowService: temporal.api.workflowservice.v1.WorkflowService;
  withDeadline<T>(deadline: number | Date, fn: () => Promise<T>): Promise<T>;
}

/** Which deployment, in which namespace, serving which task queue: what every read and promotion names. */
export interface ReleaseTarget {
  namespace: string;
  deploymentName: string;
  /** The main task queue (TEMPORAL_TASK_QUEUE); its `-webhooks` companion is implied. */
  taskQueue: string;
}

/** The deployment name: TEMPORAL_DEPLOYMENT_NAME, or the task queue's name. */
export function deploymentNameOf(settings: Pick<Settings, 'TEMPORAL_DEPLOYMENT_NAME' | 'TEMPORAL_TASK_QUEUE'>) {
  return settings.TEMPORAL_DEPLOYMENT_NAME ?? settings.TEMPORAL_TASK_QUEUE;
}

/** The build id: TEMPORAL_BUILD_ID, or the release version in package.json. */
export function buildIdOf(settings: Pick<Settings, 'TEMPORAL_BUILD_ID'>): string {
  return settings.TEMPORAL_BUILD_ID ?? releaseVersion;
}

/** The deployment version this process's workers declare, or null when TEMPORAL_WORKER_VERSIONING is off. */
export function deploymentVersionOf(
  settings: Pick<
    Settings,
    'TEMPORAL_DEPLOYMENT_NAME' | 'TEMPORAL_TASK_QUEUE' | 'TEMPORAL_BUILD_ID' | 'TEMPORAL_WORKER_VERSIONING'
  >,
): WorkerDeploymentVersion | null {
  if (settings.TEMPORAL_WORKER_VERSIONING === 'off') return null;
  return { deploymentName: deploymentNameOf(settings), buildId: buildIdOf(settings) };
}

/** The deployment, namespace and task queue that `settings` name. */
export function releaseTargetOf(settings: Settings): ReleaseTarget {
  return {
    namespace: settings.TEMPORAL_NAMESPACE,
    deploymentName: deploymentNameOf(settings),
    taskQueue: settings.TEMPORAL_TASK_QUEUE,
  };
}

/**
 * The runs whose last workflow task a build completed, as a visibility filter. Servers index the
 * version as `deployment:build`, the first ones with Worker Deployments as `deployment.build` (a
 * deployment name has neither character, so neither form matches another deployment's build).
 */
export function versionFilter(deploymentName: string, buildId: string): string {
  return `TemporalWorkerDeploymentVersion IN ("${deploymentName}:${buildId}", "${deploymentName}.${buildId}")`;
}

export type QueueType = 'workflow' | 'activity';

/** A task queue of one type that a build's workers poll. */
export interface ServedQueue {
  name: string;
  type: QueueType;
}

/** The queues every build of this service polls: the main queue's workflows and activities, and the webhook activities. */
export function serviceTaskQueues(taskQueue: string): ServedQueue[] {
  return [
    { name: taskQueue, type: 'workflow' },
    { name: taskQueue, type: 'activity' },
    { name: webhookActivityQueue(taskQueue), type: 'activity' },
  ];
}

const enums = temporal.api.enums.v1;
const queueTypes: Record<QueueType, temporal.api.enums.v1.TaskQueueType> = {
  workflow: enums.TaskQueueType.TASK_QUEUE_TYPE_WORKFLOW,
  activity: enums.TaskQueueType.TASK_QUEUE_TYPE_ACTIVITY,
};

/**
 * The deadline of a routing change (a build made current or ramping). The server answers it only
 * once its deployment's own workflow has applied the change to the build's task queues, which on
 * a busy server took longer than TEMPORAL_CALL_TIMEOUT_MS three times in a row (CI, 2026-11-27).
 */
export const ROUTING_CHANGE_TIMEOUT_MS = 30_000;

/** `fn` against the server with `timeoutMs` (TEMPORAL_CALL_TIMEOUT_MS unless said) as its deadline. */
export function call<T>(
  connection: TemporalConnection,
  fn: () => Promise<T>,
  timeoutMs = TEMPORAL_CALL_TIMEOUT_MS,
): Promise<T> {
  return connection.withDeadline(Date.now() + timeoutMs, fn);
}

/** The gRPC status code somewhere in `err`'s cause chain (the client wraps the server's error). */
export function grpcCodeOf(err: unknown): number | undefined {
  for (let at = err, depth = 0; at instanceof Error && depth < 6; at = at.cause, depth++) {
    const { code } = at as { code?: unknown };
    if (typeof code === 'number') return code;
  }
  return undefined;
}

/** True when the server has no Worker Deployments (the time-skipping test server). */
export function isUnimplemented(err: unknown): boolean {
  return grpcCodeOf(err) === grpcStatus.UNIMPLEMENTED;
}

/** What the server says of a build: its routing role, and whether runs pinned to it remain. */
export type VersionStatus = 'inactive' | 'current' | 'ramping' | 'draining' | 'drained';

/** One build of the deployment, as the server lists it. */
export interface VersionSummary {
  buildId: string;
  status: VersionStatus;
  /** The server's drainage status: refreshed every `matching.wv.VersionDrainageStatusRefreshInterval` (3 min by default). */
  drainage: 'draining' | 'drained' | null;
  drainageCheckedAt: Date | null;
  createdAt: Date | null;
  currentSince: Date | null;
  /** When it last stopped being current or ramping. */
  deactivatedAt: Date | null;
}

/** The deployment's routing: which build is current (null: the unversioned workers) and which ramps. */
export interface DeploymentState {
  current: string | null;
  ramping: { buildId: string; percentage: number } | null;
  /** The last change of the current build, or of the ramp. */
  routingChangedAt: Date | null;
  versions: VersionSummary[];
  /** Passed back with a change, so that it fails if anyone changed the routing since this read. */
  conflictToken: Uint8Array;
}

const versionStatuses: Partial<Record<number, VersionStatus>> = {
  [enums.WorkerDeploymentVersionStatus.WORKER_DEPLOYMENT_VERSION_STATUS_INACTIVE]: 'inactive',
  [enums.WorkerDeploymentVersionStatus.WORKER_DEPLOYMENT_VERSION_STATUS_CREATED]: 'inactive',
  [enums.WorkerDeploymentVersionStatus.WORKER_DEPLOYMENT_VERSION_STATUS_CURRENT]: 'current',
  [enums.WorkerDeploymentVersionStatus.WORKER_DEPLOYMENT_VERSION_STATUS_RAMPING]: 'ramping',
  [enums.WorkerDeploymentVersionStatus.WORKER_DEPLOYMENT_VERSION_STATUS_DRAINING]: 'draining',
  [enums.WorkerDeploymentVersionStatus.WORKER_DEPLOYMENT_VERSION_STATUS_DRAINED]: 'drained',
};

const drainageStatuses: Partial<Record<number, 'draining' | 'drained'>> = {
  [enums.VersionDrainageStatus.VERSION_DRAINAGE_STATUS_DRAINING]: 'draining',
  [enums.VersionDrainageStatus.VERSION_DRAINAGE_STATUS_DRAINED]: 'drained',
};

const latest = (...dates: Array<Date | undefined>) =>
  dates.reduce<Date | null>((a, d) => (d && (!a || d > a) ? d : a), null);

/** The deployment's routing and builds; null when no versioned worker has polled for it yet. */
export async function describeDeployment(
  connection: TemporalConnection,
  target: ReleaseTarget,
): Promise<DeploymentState | null> {
  let res: temporal.api.workflowservice.v1.IDescribeWorkerDeploymentResponse;
  try {
    res = await call(connection, () =>
      connection.workflowService.describeWorkerDeployment({
        namespace: target.namespace,
        deploymentName: target.deploymentName,
      }),
    );
  } catch (err) {
    if (grpcCodeOf(err) === grpcStatus.NOT_FOUND) return null;
    throw err;
  }
  const info = res.workerDeploymentInfo ?? {};
  const routing = info.routingConfig ?? {};
  const ramping = routing.rampingDeploymentVersion?.buildId;
  return {
    current: routing.currentDeploymentVersion?.buildId || null,
    ramping: ramping ? { buildId: ramping, percentage: routing.rampingVersionPercentage ?? 0 } : null,
    routingChangedAt: latest(
      optionalTsToDate(routing.currentVersionChangedTime),
      optionalTsToDate(routing.rampingVersionChangedTime),
    ),
    versions: (info.versionSummaries ?? []).map((v) => ({
      buildId: v.deploymentVersion?.buildId ?? '',
      status: versionStatuses[v.status ?? 0] ?? 'inactive',
      drainage: drainageStatuses[v.drainageInfo?.status ?? 0] ?? null,
      drainageCheckedAt: optionalTsToDate(v.drainageInfo?.lastCheckedTime) ?? null,
      createdAt: optionalTsToDate(v.createTime) ?? null,
      currentSince: optionalTsToDate(v.currentSinceTime) ?? null,
      deactivatedAt: optionalTsToDate(v.lastDeactivationTime) ?? null,
    })),
    conflictToken: res.conflictToken ?? new Uint8Array(),
  };
}

/** The task queues a build's workers have ever polled, as the server recorded them. */
export async function versionTaskQueues(
  connection: TemporalConnection,
  target: ReleaseTarget,
  buildId: string,
): Promise<ServedQueue[]> {
  const res = await call(connection, () =>
    connection.workflowService.describeWorkerDeploymentVersion({
      namespace: target.namespace,
      deploymentVersion: { deploymentName: target.deploymentName, buildId },
    }),
  );
  return (res.versionTaskQueues ?? []).flatMap((q) => {
    const type = (Object.keys(queueTypes) as QueueType[]).find((t) => queueTypes[t] === q.type);
    return type && q.name ? [{ name: q.name, type }] : [];
  });
}

/** A worker polling a task queue, as the server last saw it. */
export interface Poller {
  taskQueue: string;
  type: QueueType;
  identity: string;
  lastSeenAt: Date;
  /** Seen within POLLER_LIVE_WINDOW_MS. */
  live: boolean;
  /** Its deployment and build; both null for an unversioned worker. */
  deploymentName: string | null;
  buildId: string | null;
}

/** Every worker the server lists on `queues` (live or seen in the last minutes), with its build. */
export async function pollersOn(
  connection: TemporalConnection,
  namespace: string,
  queues: readonly ServedQueue[],
  now: Date,
): Promise<Poller[]> {
  const lists = await Promise.all(
    queues.map(async (queue) => {
      const res = await call(connection, () =>
        connection.workflowService.describeTaskQueue({
          namespace,
          taskQueue: { name: queue.name, kind: enums.TaskQueueKind.TASK_QUEUE_KIND_NORMAL },
          taskQueueType: queueTypes[queue.type],
        }),
      );
      return (res.pollers ?? []).map((p): Poller => {
        const lastSeenAt = optionalTsToDate(p.lastAccessTime) ?? new Date(0);
        const versioned =
          p.deploymentOptions?.workerVersioningMode === enums.WorkerVersioningMode.WORKER_VERSIONING_MODE_VERSIONED;
        return {
          taskQueue: queue.name,
          type: queue.type,
          identity: p.identity ?? '',
          lastSeenAt,
          live: now.getTime() - lastSeenAt.getTime() <= POLLER_LIVE_WINDOW_MS,
          deploymentName: versioned ? (p.deploymentOptions?.deploymentName ?? null) : null,
          buildId: versioned ? (p.deploymentOptions?.buildId ?? null) : null,
        };
      });
    }),
  );
  return lists.flat();
}

/** How many workflow executions match a visibility query. */
export async function countWorkflows(connection: TemporalConnection, namespace: string, query: string) {
  const res = await call(connection, () => connection.workflowService.countWorkflowExecutions({ namespace, query }));
  return Number(res.count ?? 0);
}

/** The queues in `wanted` on which no live worker of `buildId` (in `deploymentName`) polls. */
export function queuesWithoutBuild(
  pollers: readonly Poller[],
  wanted: readonly ServedQueue[],
  deploymentName: string,
  buildId: string,
): ServedQueue[] {
  return wanted.filter(
    (q) =>
      !pollers.some(
        (p) =>
          p.live &&
          p.taskQueue === q.name &&
          p.type === q.type &&
          p.deploymentName === deploymentName &&
          p.buildId === buildId,
      ),
  );
}

/** `a` and `b` together, each queue once. */
export function unionOfQueues(a: readonly ServedQueue[], b: readonly ServedQueue[]): ServedQueue[] {
  const seen = new Set<string>();
  return [...a, ...b].filter((q) => {
    const key = `${q.type} ${q.name}`;
    if (seen.has(key)) return false;
    seen.add(key);
    return true;
  });
}

/**
 * `ops release promote` and `ops release status`: the Worker Deployment calls of a release
 * (docs/workflows.md, "Worker Deployment Versioning").
 */
import { status as grpcStatus } from '@grpc/grpc-js';
import {
  call,
  countWorkflows,
  describeDeployment,
  DRAIN_SETTLE_MS,
  ROUTING_CHANGE_TIMEOUT_MS,
  grpcCodeOf,
  pollersOn,
  queuesWithoutBuild,
  serviceTaskQueues,
  unionOfQueues,
  versionFilter,
  versionTaskQueues,
  type DeploymentState,
  type Poller,
  type ReleaseTarget,
  type ServedQueue,
  type TemporalConnection,
  type VersionSummary,
} from '../temporal/deployment';
import { mapLimited } from '../lib/concurrency';
import { OpsError } from './errors';

/**
 * How long `release promote` waits by default for the build's workers to poll every queue (they may
 * have just started), and for a busy server to answer.
 */
export const PROMOTE_WAIT_MS = 60_000;
const RECHECK_MS = 500;

export interface PromoteOptions {
  buildId: string;
  /** 1–99: route this share of new and auto-upgrading runs to the build, the current build keeping the rest. */
  rampPercent?: number;
  /** How long to wait for the build's workers to poll every task queue it must serve; 0: look once. */
  waitMs: number;
  /** Who changes the routing, as the deployment records it. */
  identity: string;
  /**
   * A reason not to promote, given what was just read (the worker's first promotion refuses a
   * deployment someone else serves); evaluated on the very read whose conflict token the change carries.
   */
  declineIf?: (state: DeploymentState | null, pollers: readonly Poller[]) => string | null;
}

/** What `release promote` prints. */
export interface PromoteResult {
  deployment: string;
  build_id: string;
  /** The build current before, which AUTO_UPGRADE runs leave at their next task; null: the unversioned workers. */
  previous_build_id: string | null;
  /** The ramp now set (with --ramp), else null: the build is current. */
  ramping_percentage: number | null;
  /** False when nothing had to change (the build was current, or ramping at that share, already). */
  changed: boolean;
  message: string;
}

const describeQueues = (queues: readonly ServedQueue[]) => queues.map((q) => `${q.name} (${q.type})`).join(', ');
const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));
const previousName = (buildId: string | null) => (buildId === null ? 'the unversioned workers' : `build ${buildId}`);

/** A Temporal failure as the operator's error: the server's own words, no stack. */
export function temporalRefusal(err: unknown, doing: string): OpsError {
  const code = grpcCodeOf(err);
  const message = err instanceof Error ? err.message : String(err);
  if (code === grpcStatus.DEADLINE_EXCEEDED || code === grpcStatus.UNAVAILABLE) {
    return new OpsError('temporal_unavailable', `Temporal did not answer while ${doing}: ${message}`);
  }
  if (code === grpcStatus.RESOURCE_EXHAUSTED) {
    return new OpsError('temporal_unavailable', `Temporal was too busy while ${doing}: ${message}`);
  }
  if (code === grpcStatus.UNIMPLEMENTED) {
    return new OpsError('versioning_unsupported', `this Temporal server has no Worker Deployments (${message})`);
  }
  return new OpsError('temporal_error', `Temporal refused ${doing}: ${message}`);
}

/**
 * Makes `buildId` the deployment's current build (or ramps it), once its workers poll every task
 * queue the service and the current build serve; refuses otherwise, naming the queues. The change
 * carries the conflict token of the read it was decided on, so a concurrent change makes it fail.
 */
export async function promoteBuild(
  connection: TemporalConnection,
  target: ReleaseTarget,
  options: PromoteOptions,
): Promise<PromoteResult> {
  const { buildId, rampPercent } = options;
  const result = (previous: string | null, changed: boolean, message: string): PromoteResult => ({
    deployment: target.deploymentName,
    build_id: buildId,
    previous_build_id: previous,
    ramping_percentage: rampPercent ?? null,
    changed,
    message,
  });
  const giveUpAt = Date.now() + options.waitMs;
  /** The routing change this call sent whose answer it did not get: it may land after its deadline. */
  let unanswered: { previous: string | null } | null = null;
  for (;;) {
    let step: PromoteStep;
    try {
      step = await promoteStep(connection, target, options, unanswered !== null);
    } catch (err) {
      // A busy or unreachable server is asked again while the wait lasts, from a fresh read.
      if (!isTransient(err)) throw err;
      if (err instanceof UnansweredChange) unanswered ??= { previous: err.previous };
      if (Date.now() >= giveUpAt) {
        const refusal = err instanceof UnansweredChange ? err.refusal : (err as OpsError);
        if (!unanswered) throw refusal;
        throw new OpsError(
          'temporal_unavailable',
          `${refusal.message}; the change was sent and may still take effect: read \`release status\` before promoting again`,
        );
      }
      await sleep(RECHECK_MS);
      continue;
    }
    if (step.done === 'landed') {
      // The read shows this build routed as asked: either this call's change, or (unanswered) the
      // change it sent before, applied after that call's deadline.
      if (unanswered)
        return result(unanswered.previous, true, changedMessage(buildId, rampPercent, unanswered.previous));
      return result(step.current, false, step.message);
    }
    if (step.done === 'changed')
      return result(step.previous, true, changedMessage(buildId, rampPercent, step.previous));
    if (Date.now() >= giveUpAt) {
      const waited = options.waitMs > 0 ? ` (waited ${Math.round(options.waitMs / 1000)} s)` : '';
      throw new OpsError(
        'build_not_polling',
        `no live worker of build ${buildId} (deployment ${target.deploymentName}) polls ${step.where}${waited}; start the workers of build ${buildId} first`,
      );
    }
    await sleep(RECHECK_MS);
  }
}

type PromoteStep =
  | { done: 'landed'; current: string | null; message: string }
  | { done: 'changed'; previous: string | null }
  | { done: false; where: string };

/** A routing change sent without an answer in time: the server may still apply it. */
class UnansweredChange extends Error {
  constructor(
    readonly previous: string | null,
    readonly refusal: OpsError,
  ) {
    super(refusal.message);
  }
}

/** Temporal did not answer in time, or shed the call: worth a fresh read while the wait lasts. */
function isTransient(err: unknown): boolean {
  if (err instanceof UnansweredChange) return true;
  return err instanceof OpsError && err.code === 'temporal_unavailable';
}

const changedMessage = (buildId: string, rampPercent: number | undefined, previous: string | null) =>
  `build ${buildId} ${rampPercent === undefined ? 'is now current' : `now ramps at ${rampPercent}%`} (current before: ${previousName(previous)})`;

/** The deployment routes as the promotion asks: the build current, or ramping at the asked share. */
const routedAsAsked = (state: DeploymentState | null, { buildId, rampPercent }: PromoteOptions) =>
  rampPercent === undefined
    ? state?.current === buildId
    : state?.ramping?.buildId === buildId && state.ramping.percentage === rampPercent;

/**
 * One read of the deployment and its pollers, and the routing change when they allow it. With
 * `sentBefore`, a change this promotion sent earlier may have landed since: a conflict is then
 * settled by the next read rather than reported.
 */
async function promoteStep(
  connection: TemporalConnection,
  target: ReleaseTarget,
  options: PromoteOptions,
  sentBefore: boolean,
): Promise<PromoteStep> {
  const { buildId, rampPercent } = options;
  const state = await describeDeployment(connection, target).catch((err: unknown) => {
    throw temporalRefusal(err, 'describing the deployment');
  });
  const current = state?.current ?? null;
  if (rampPercent !== undefined && current === buildId) {
    throw new OpsError('already_current', `build ${buildId} is current already; there is nothing to ramp`);
  }
  if (routedAsAsked(state, options)) {
    const message =
      rampPercent === undefined
        ? `build ${buildId} is current already`
        : `build ${buildId} ramps at ${rampPercent}% already (current: ${previousName(current)})`;
    return { done: 'landed', current, message };
  }
  const wanted = await queuesToServe(connection, target, current);
  const pollers = await pollersOn(connection, target.namespace, wanted, new Date()).catch((err: unknown) => {
    throw temporalRefusal(err, 'listing the task queue pollers');
  });
  const declined = options.declineIf?.(state, pollers);
  if (declined) throw new OpsError('promotion_declined', declined);
  const missing = queuesWithoutBuild(pollers, wanted, target.deploymentName, buildId);
  const registered = state?.versions.some((v) => v.buildId === buildId) ?? false;
  if (state && missing.length === 0 && registered) {
    try {
      await setRouting(connection, target, state, options);
    } catch (err) {
      if (err instanceof OpsError && err.code === 'temporal_unavailable') throw new UnansweredChange(current, err);
      if (sentBefore && err instanceof OpsError && err.code === 'deployment_changed') {
        // Likely this promotion's own earlier change, landed late: the next read tells.
        const now = await describeDeployment(connection, target).catch(() => null);
        if (routedAsAsked(now, options)) return { done: 'landed', current: now?.current ?? null, message: '' };
      }
      throw err;
    }
    return { done: 'changed', previous: current };
  }
  return { done: false, where: describeQueues(missing.length > 0 ? missing : wanted) };
}

/** The service's task queues, and any other the current build's workers poll (a build must not drop one). */
async function queuesToServe(
  connection: TemporalConnection,
  target: ReleaseTarget,
  current: string | null,
): Promise<ServedQueue[]> {
  const ours = serviceTaskQueues(target.taskQueue);
  if (current === null) return ours;
  const theirs = await versionTaskQueues(connection, target, current).catch((err: unknown) => {
    throw temporalRefusal(err, `describing build ${current}`);
  });
  return unionOfQueues(ours, theirs);
}

/** Sets the build current (clearing its ramp) or ramping, guarded by `state`'s conflict token. */
async function setRouting(
  connection: TemporalConnection,
  target: ReleaseTarget,
  state: DeploymentState,
  { buildId, rampPercent, identity }: PromoteOptions,
): Promise<void> {
  const common = {
    namespace: target.namespace,
    deploymentName: target.deploymentName,
    buildId,
    conflictToken: state.conflictToken,
    identity,
  };
  try {
    await call(
      connection,
      () =>
        rampPercent === undefined
          ? connection.workflowService.setWorkerDeploymentCurrentVersion(common)
          : connection.workflowService.setWorkerDeploymentRampingVersion({ ...common, percentage: rampPercent }),
      ROUTING_CHANGE_TIMEOUT_MS,
    );
  } catch (err) {
    const code = grpcCodeOf(err);
    if (code === grpcStatus.FAILED_PRECONDITION || code === grpcStatus.ABORTED) {
      throw new OpsError(
        'deployment_changed',
        `the deployment's routing changed while promoting build ${buildId} (another promotion?): ${
          err instanceof Error ? err.message : String(err)
        }; read release status and run again`,
      );
    }
    throw temporalRefusal(err, `promoting build ${buildId}`);
  }
}

/** One build in `release status`. */
export interface BuildStatus {
  /** null: the unversioned workers (a release before Worker Deployments, or TEMPORAL_WORKER_VERSIONING=off). */
  build_id: string | null;
  status: 'current' | 'ramping' | 'draining' | 'drained' | 'inactive';
  /** The decision in words: `current`, `ramping (10%)`, `draining (2 pinned workflows)`, `drained: safe to stop`, … */
  verdict: string;
  /** True when stopping this build's workers strands nothing: nothing routes to it and no run is pinned to it. */
  safe_to_stop: boolean;
  /** Running workflows whose last workflow task ran on this build (for the unversioned entry: running ones without a build). */
  running_workflows: number;
  /** Of them, the PINNED ones: they run nowhere else, so the build must keep workers until they end. */
  pinned_workflows: number;
  /** The server's own drainage status (refreshed every few minutes unless the dev-server flags say otherwise); null for the current build. */
  server_drainage: 'draining' | 'drained' | null;
  server_drainage_checked_at: string | null;
  /** When the server first saw a worker of this build. */
  created_at: string | null;
  current_since: string | null;
  /** When it last stopped being current or ramping. */
  deactivated_at: string | null;
  pollers: Array<{ task_queue: string; type: string; identity: string; last_seen_at: string; live: boolean }>;
}

/** What `release status` prints. */
export interface ReleaseStatus {
  deployment: string;
  namespace: string;
  task_queues: ServedQueue[];
  /** null: nothing is current and new runs go to the unversioned workers. */
  current_build_id: string | null;
  ramping: { build_id: string; percentage: number } | null;
  routing_changed_at: string | null;
  builds: BuildStatus[];
  checked_at: string;
}

const iso = (d: Date | null | undefined) => d?.toISOString() ?? null;
type Verdict = Pick<BuildStatus, 'status' | 'verdict' | 'safe_to_stop'>;

/** A build's document, the verdict first (after its id). */
function withVerdict(base: Omit<BuildStatus, keyof Verdict>, v: Verdict): BuildStatus {
  const { build_id, ...rest } = base;
  return { build_id, ...v, ...rest };
}
const plural = (n: number, word: string) => `${n} ${word}${n === 1 ? '' : 's'}`;

/**
 * The deployment's builds, current first: each one's pollers, what it still runs (counted through
 * visibility) and whether its workers can stop. The verdict trusts our own count of pinned runs
 * DRAIN_SETTLE_MS after a build stopped being current, not the server's drainage status, which a
 * server refreshes every 3 minutes by default.
 */
export async function readReleaseStatus(
  connection: TemporalConnection,
  target: ReleaseTarget,
  now: Date = new Date(),
): Promise<ReleaseStatus> {
  try {
    const state = await describeDeployment(connection, target);
    const current = state?.current ?? null;
    const queues = await queuesToServe(connection, target, current);
    const pollers = (await pollersOn(connection, target.namespace, queues, now)).filter(
      (p) => p.deploymentName === null || p.deploymentName === target.deploymentName,
    );
    // Two visibility counts per build; a deployment keeps up to 100 builds.
    const versions = await mapLimited(state?.versions ?? [], 4, (v) =>
      versionStatus(connection, target, state!, v, pollers, now),
    );
    const unversioned = await unversionedStatus(connection, target, state, pollers);
    const builds = [...versions, ...(unversioned ? [unversioned] : [])].sort(byListOrder);
    return {
      deployment: target.deploymentName,
      namespace: target.namespace,
      task_queues: queues,
      current_build_id: current,
      ramping: state?.ramping ? { build_id: state.ramping.buildId, percentage: state.ramping.percentage } : null,
      routing_changed_at: iso(state?.routingChangedAt),
      builds,
      checked_at: now.toISOString(),
    };
  } catch (err) {
    if (err instanceof OpsError) throw err;
    throw temporalRefusal(err, 'reading the release status');
  }
}

const statusOrder: Partial<Record<BuildStatus['status'], number>> = { current: 0, ramping: 1 };

/** Current, then ramping, then the others newest first, the unversioned workers last. */
function byListOrder(a: BuildStatus, b: BuildStatus): number {
  const rank = (x: BuildStatus) => statusOrder[x.status] ?? (x.build_id === null ? 3 : 2);
  return rank(a) - rank(b) || (b.created_at ?? '').localeCompare(a.created_at ?? '');
}

function pollersOf(pollers: readonly Poller[], buildId: string | null): BuildStatus['pollers'] {
  return pollers
    .filter((p) => p.buildId === buildId)
    .map((p) => ({
      task_queue: p.taskQueue,
      type: p.type,
      identity: p.identity,
      last_seen_at: p.lastSeenAt.toISOString(),
      live: p.live,
    }))
    .sort((a, b) => `${a.task_queue} ${a.type} ${a.identity}`.localeCompare(`${b.task_queue} ${b.type} ${b.identity}`));
}

async function versionStatus(
  connection: TemporalConnection,
  target: ReleaseTarget,
  state: DeploymentState,
  v: VersionSummary,
  pollers: readonly Poller[],
  now: Date,
): Promise<BuildStatus> {
  const running = `ExecutionStatus = "Running" AND ${versionFilter(target.deploymentName, v.buildId)}`;
  const [runningCount, pinned] = await Promise.all([
    countWorkflows(connection, target.namespace, running),
    countWorkflows(connection, target.namespace, `${running} AND TemporalWorkflowVersioningBehavior = "Pinned"`),
  ]);
  const base = {
    build_id: v.buildId,
    running_workflows: runningCount,
    pinned_workflows: pinned,
    server_drainage: v.drainage,
    server_drainage_checked_at: iso(v.drainageCheckedAt),
    created_at: iso(v.createdAt),
    current_since: iso(v.currentSince),
    deactivated_at: iso(v.deactivatedAt),
    pollers: pollersOf(pollers, v.buildId),
  };
  if (state.current === v.buildId)
    return withVerdict(base, { status: 'current', verdict: 'current', safe_to_stop: false });
  if (state.ramping?.buildId === v.buildId) {
    return withVerdict(base, {
      status: 'ramping',
      verdict: `ramping (${state.ramping.percentage}%)`,
      safe_to_stop: false,
    });
  }
  if (pinned > 0) {
    const verdict = `draining (${plural(pinned, 'pinned workflow')})`;
    return withVerdict(base, { status: 'draining', verdict, safe_to_stop: false });
  }
  if (v.status === 'inactive') {
    return withVerdict(base, {
      status: 'inactive',
      verdict: 'inactive (never current): safe to stop',
      safe_to_stop: true,
    });
  }
  const since = v.deactivatedAt ?? state.routingChangedAt;
  const settling = since ? DRAIN_SETTLE_MS - (now.getTime() - since.getTime()) : 0;
  if (settling > 0) {
    const verdict = `draining (no pinned workflow; counting again ${Math.ceil(settling / 1000)} s from now)`;
    return withVerdict(base, { status: 'draining', verdict, safe_to_stop: false });
  }
  return withVerdict(base, { status: 'drained', verdict: 'drained: safe to stop', safe_to_stop: true });
}

/**
 * The unversioned workers (the release before Worker Deployments) when any poll, any run has no
 * build yet, or they are still current. Their runs are never pinned: once a build is current
 * each moves to it at its next workflow task, so they may stop then.
 */
async function unversionedStatus(
  connection: TemporalConnection,
  target: ReleaseTarget,
  state: DeploymentState | null,
  pollers: readonly Poller[],
): Promise<BuildStatus | null> {
  const running = await countWorkflows(
    connection,
    target.namespace,
    `TaskQueue = "${target.taskQueue}" AND ExecutionStatus = "Running" AND TemporalWorkerDeploymentVersion IS NULL`,
  );
  const own = pollersOf(pollers, null);
  const current = state?.current ?? null;
  if (current !== null && running === 0 && own.length === 0) return null;
  const base = {
    build_id: null,
    running_workflows: running,
    pinned_workflows: 0,
    server_drainage: null,
    server_drainage_checked_at: null,
    created_at: null,
    current_since: null,
    deactivated_at: null,
    pollers: own,
  };
  if (current === null) return withVerdict(base, { status: 'current', verdict: 'current', safe_to_stop: false });
  const moving =
    running > 0 ? ` (${plural(running, 'unversioned workflow')} move to build ${current} at their next task)` : '';
  return withVerdict(base, { status: 'drained', verdict: `drained: safe to stop${moving}`, safe_to_stop: true });
}

import { Interceptor, Metadata, NextCall, status as grpcStatus } from '@grpc/grpc-js';
import { defaultGrpcRetryOptions, makeGrpcRetryInterceptor } from '@temporalio/client';
import { temporalErrorCause } from './grpc-error';

/** The default deadline of one Temporal call the API makes (TEMPORAL_CALL_TIMEOUT_MS), the SDK's retries included. */
export const TEMPORAL_CALL_TIMEOUT_MS = 5_000;

/**
 * gRPC keepalive and reconnection on the API's Temporal connection: a connection whose peer went
 * silent is found dead within 20 s (a ping every 15 s, above the server's 10 s minimum, answered
 * within 5 s; the SDK's defaults, 30 s and 15 s, took 45 s), and while Temporal is unreachable
 * the channel tries to connect again at least every 5 s (grpc-js backs off to 120 s), so once the
 * path is back the API is too within seconds, not at the end of a long backoff.
 */
export const TEMPORAL_KEEPALIVE = {
  'grpc.keepalive_time_ms': 15_000,
  'grpc.keepalive_timeout_ms': 5_000,
  'grpc.keepalive_permit_without_calls': 1,
  'grpc.initial_reconnect_backoff_ms': 1_000,
  'grpc.max_reconnect_backoff_ms': 5_000,
} as const;

/**
 * Replaces the SDK's default retry interceptor: every call gets a deadline `callTimeoutMs` from its
 * start unless its caller set one (`connection.withDeadline`), and the SDK's retries of an
 * unavailable server stop when the next try would start past it, so no call outlives its deadline.
 */
export function deadlineInterceptor(callTimeoutMs: number): Interceptor {
  const defaults = defaultGrpcRetryOptions();
  return (options, nextCall) => {
    const given = options.deadline === undefined ? Infinity : new Date(options.deadline).getTime();
    const deadline = Number.isFinite(given) ? given : Date.now() + callTimeoutMs;
    let delay = 0;
    const retries = makeGrpcRetryInterceptor({
      retryableDecider: (attempt, status) => {
        if (!defaults.retryableDecider(attempt, status)) return false;
        delay = defaults.delayFunction(attempt, status);
        return Date.now() + delay < deadline;
      },
      delayFunction: () => delay,
    });
    return retries({ ...options, deadline }, closedChannelSafe(nextCall));
  };
}

/**
 * When `err` is a Temporal call that ran out of time, found no server or was shed for a moment
 * (rather than a refusal), the deadline that ended it, by its setting's name (`none`: no deadline
 * did: the server was unreachable, or shed the call).
 */
export function temporalDeadlineOf(err: unknown): string | undefined {
  const status = temporalErrorCause(err).grpc_status;
  if (status === 'DEADLINE_EXCEEDED') return 'TEMPORAL_CALL_TIMEOUT_MS';
  // CANCELLED: the channel gave the call up (a connection that timed out while being set up, or
  // closed under the call), so the server is as unreachable as with UNAVAILABLE. RESOURCE_EXHAUSTED:
  // the server shed the call and takes it again shortly: "Workflow is busy" while the workflow's
  // shard moves between history nodes (a node died or came back), or a rate limit; the SDK's
  // retries of it (with a longer backoff) ran out within the call's deadline.
  if (status === 'UNAVAILABLE' || status === 'CANCELLED' || status === 'RESOURCE_EXHAUSTED') return 'none';
  return undefined;
}

/**
 * `nextCall` that answers a call on a closed connection with CANCELLED instead of throwing. The
 * SDK's retry interceptor starts a retry from a timer that `Connection.close()` does not clear; on
 * a closed channel the throw escaped as an uncaught exception (an API stopping while a call to an
 * unreachable server waited for its retry exited with an error).
 */
function closedChannelSafe(nextCall: NextCall): NextCall {
  return (options) => {
    try {
      return nextCall(options);
    } catch (err) {
      if (!isClosedChannelError(err)) throw err;
      return endedCall(grpcStatus.CANCELLED, err.message);
    }
  };
}

/** What grpc-js throws when a call is made on a channel that was closed. */
export function isClosedChannelError(err: unknown): err is Error {
  return err instanceof Error && err.message === 'Channel has been shut down';
}

/**
 * A call that ends with `code` as soon as it starts, having sent nothing: both an intercepting
 * call (what `nextCall` returns) and a channel's call (what `createCall` returns).
 */
export function endedCall(
  code: grpcStatus,
  details: string,
): ReturnType<NextCall> & {
  getCallNumber(): number;
  setCredentials(): void;
} {
  return {
    start: (_metadata, listener) =>
      void setImmediate(() => listener?.onReceiveStatus?.({ code, details, metadata: new Metadata() })),
    cancelWithStatus: () => undefined,
    getPeer: () => '',
    sendMessageWithContext: () => undefined,
    sendMessage: () => undefined,
    startRead: () => undefined,
    halfClose: () => undefined,
    getAuthContext: () => null,
    getCallNumber: () => 0,
    setCredentials: () => undefined,
  };
}

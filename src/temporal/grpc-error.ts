import { errorCause } from '../lib/log';

/** What a Temporal call's failure was: the gRPC status name and the server's message when it has them (the client wraps them as `cause`). */
export interface TemporalErrorCause {
  /** The wrapper's message (`Failed to start Workflow`) or the error's own. */
  error: string;
  /** The gRPC status name (`INVALID_ARGUMENT`), or `other` for a failure without one. */
  grpc_status: string;
  /** The server's message (`Namespace default has no search attribute MerchantId`), when there is one. */
  grpc_message?: string;
}

/** `err` described for a metric label and a decision: the gRPC status that the logger's `errorCause` finds in its cause chain. */
export function temporalErrorCause(err: unknown): TemporalErrorCause {
  const error = err instanceof Error ? err.message : String(err);
  const cause = errorCause(err) as { grpc_status?: string; grpc_message?: string } | undefined;
  if (!cause?.grpc_status) return { error, grpc_status: 'other' };
  return { error, grpc_status: cause.grpc_status, grpc_message: cause.grpc_message };
}

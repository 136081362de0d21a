import { status as grpcStatus } from '@grpc/grpc-js';

/** What a Temporal call's failure was: the gRPC status name and the server's message when it has them (the client wraps them as `cause`). */
export interface TemporalErrorCause {
  /** The wrapper's message (`Failed to start Workflow`) or the error's own. */
  error: string;
  /** The gRPC status name (`INVALID_ARGUMENT`), or `other` for a failure without one. */
  grpc_status: string;
  /** The server's message (`Namespace default has no search attribute MerchantId`), when there is one. */
  grpc_message?: string;
}

/** The first error in `err`'s cause chain that carries a gRPC status code. */
function grpcErrorIn(err: unknown): { code: number; details?: string; message: string } | undefined {
  for (let e = err, depth = 0; e instanceof Error && depth < 5; e = e.cause, depth++) {
    const code = (e as { code?: unknown }).code;
    if (typeof code === 'number' && grpcStatus[code] !== undefined)
      return e as Error & { code: number; details?: string };
  }
  return undefined;
}

/** `err` described for a log line and a metric label: never just "Failed to start Workflow". */
export function temporalErrorCause(err: unknown): TemporalErrorCause {
  const error = err instanceof Error ? err.message : String(err);
  const grpc = grpcErrorIn(err);
  if (!grpc) return { error, grpc_status: 'other' };
  return { error, grpc_status: grpcStatus[grpc.code], grpc_message: grpc.details || grpc.message };
}

import { postgresDeadlineOf } from '../db/deadlines';
import { temporalErrorCause } from '../temporal/grpc-error';
import { DeadlineExceeded } from './metrics';

/** Why a dependency did not answer, for a log line, `/readyz` and `ops status`: a class and a sentence without secrets or stacks. */
export interface Fault {
  /** deadline | connection_refused | unreachable | refused (the server answered with an error) | error. */
  error_class: 'deadline' | 'connection_refused' | 'unreachable' | 'refused' | 'error';
  detail: string;
}

/** Socket error codes of a peer that is not there, as node reports them. */
const UNREACHABLE = /\b(ECONNRESET|ETIMEDOUT|EHOSTUNREACH|ENETUNREACH|EPIPE|ENOTFOUND|EAI_AGAIN)\b/;

/** The first line of `message`, at most 200 characters (a driver's message, never a stack). */
function firstLine(message: string): string {
  return message.split('\n')[0].slice(0, 200);
}

/** `err` of a probe of Postgres or Temporal, described (`deadline`: the setting whose bound it passed). */
export function faultOf(error: unknown, deadline: string): Fault {
  const err = error as Error;
  if (error instanceof DeadlineExceeded)
    return { error_class: 'deadline', detail: `no answer within ${error.ms} ms (${deadline})` };
  // Duck-typed: errors of node's own (a refused socket) may come from another realm (jest's sandbox).
  if (typeof error !== 'object' || error === null || typeof err.message !== 'string')
    return { error_class: 'error', detail: firstLine(String(error)) };
  const { code, severity } = err as Error & { code?: unknown; severity?: unknown };
  const grpc = temporalErrorCause(err);
  const text = [err.message, grpc.grpc_message ?? ''].join(' ');
  if (code === 'ECONNREFUSED' || /ECONNREFUSED/.test(text))
    return { error_class: 'connection_refused', detail: 'connection refused (ECONNREFUSED)' };
  const unreachable = (typeof code === 'string' ? code : '').match(UNREACHABLE) ?? text.match(UNREACHABLE);
  if (unreachable) return { error_class: 'unreachable', detail: `unreachable (${unreachable[1]})` };
  if (grpc.grpc_status === 'DEADLINE_EXCEEDED')
    return { error_class: 'deadline', detail: `no answer within its deadline (${deadline})` };
  if (grpc.grpc_status === 'UNAVAILABLE')
    return { error_class: 'unreachable', detail: `unavailable: ${firstLine(grpc.grpc_message ?? err.message)}` };
  if (typeof code === 'string' && severity !== undefined)
    return { error_class: 'refused', detail: `SQLSTATE ${code}: ${firstLine(err.message)}` };
  const postgres = postgresDeadlineOf(err);
  if (postgres && postgres !== 'none')
    return { error_class: 'deadline', detail: `no answer within its deadline (${postgres})` };
  if (postgres === 'none') return { error_class: 'unreachable', detail: firstLine(err.message) };
  return { error_class: 'error', detail: firstLine(err.message) };
}

/**
 * Structured one-line JSON logs on stderr (pino); never pass secrets or request bodies here. Not for
 * the workflow bundle (it needs `process` and streams): workflows log through the SDK's logger.
 */
import { AsyncLocalStorage } from 'node:async_hooks';
import { status as grpcStatus } from '@grpc/grpc-js';
import { isSpanContextValid, trace } from '@opentelemetry/api';
import pino, { type DestinationStream, type Logger } from 'pino';

/** A level of ours; `silent` logs nothing. */
export type LogLevel = 'debug' | 'info' | 'warn' | 'error' | 'silent';

/** Field names whose values never reach a log line, at the top or one level down (a key, a code, a phone). */
const SECRET_FIELDS = [
  'key',
  'api_key',
  'secret',
  'signing_secret',
  'password',
  'authorization',
  'cookie',
  'token',
  'customer_token',
  'otp',
  'otp_code',
  'phone',
  'phone_number',
  'body',
];

/** The request a log line was written for: the Koa state of the request being served, if any. */
interface RequestScope {
  requestId?: string;
}
const requestScope = new AsyncLocalStorage<RequestScope>();

/** Runs `fn` with `state` as the request every log line inside it belongs to (its `request_id`). */
export function withRequestScope<T>(state: RequestScope, fn: () => T): T {
  return requestScope.run(state, fn);
}

/** The request id and the active trace and span, added to every line written inside them. */
function scopeFields(): Record<string, string> {
  const out: Record<string, string> = {};
  const requestId = requestScope.getStore()?.requestId;
  if (requestId) out.request_id = requestId;
  const span = trace.getActiveSpan()?.spanContext();
  if (span && isSpanContextValid(span)) {
    out.trace_id = span.traceId;
    out.span_id = span.spanId;
  }
  return out;
}

const GRPC_STATUS_NAMES = new Map(Object.entries(grpcStatus).map(([name, code]) => [code, name]));

/**
 * An error as a log field: its type and message, and from its cause chain what says why, the gRPC
 * status and message of a Temporal call (`Failed to start Workflow` alone says nothing) and the
 * SQLSTATE (and constraint) of a Postgres error. No stack; anything else passes through.
 */
export function errorCause(err: unknown): unknown {
  if (!(err instanceof Error)) return err;
  const out: Record<string, unknown> = { type: err.name, message: err.message };
  const causes: string[] = [];
  let at: unknown = err;
  for (let depth = 0; at instanceof Error && depth < 6; depth++, at = at.cause) {
    const e = at as Error & { code?: unknown; details?: unknown; metadata?: unknown; severity?: unknown };
    if (at !== err) causes.push(e.message);
    if (typeof e.code === 'number' && typeof e.details === 'string' && e.metadata !== undefined) {
      out.grpc_status = GRPC_STATUS_NAMES.get(e.code) ?? String(e.code);
      out.grpc_message = e.details;
    }
    if (typeof e.code === 'string' && /^[0-9A-Z]{5}$/.test(e.code) && e.severity !== undefined) {
      out.sqlstate = e.code;
      const { constraint } = at as { constraint?: string };
      if (constraint) out.constraint = constraint;
    }
  }
  if (causes.length > 0) out.cause = causes.join(': ');
  return out;
}

/** `errorCause` as one line, for a `last_error` column: `message (GRPC_STATUS: grpc message)` or `message (SQLSTATE 23505)`. */
export function errorText(err: unknown): string {
  const cause = errorCause(err);
  if (typeof cause !== 'object' || cause === null) return String(cause);
  const { message, grpc_status: grpc, grpc_message: grpcMessage, sqlstate } = cause as Record<string, string>;
  if (grpc) return `${message} (${grpc}: ${grpcMessage})`;
  if (sqlstate) return `${message} (SQLSTATE ${sqlstate})`;
  return message;
}

/** Options of `createLogger`. */
export interface LoggerOptions {
  level?: LogLevel;
  /** Where lines go (tests capture them); default stderr. */
  destination?: DestinationStream;
  /** Human-readable lines (pino-pretty), for a person at a terminal. */
  pretty?: boolean;
}

/** A pino logger in our line format: ISO time, level by name, request and trace ids, secrets redacted. */
export function createLogger(options: LoggerOptions = {}): Logger {
  const destination =
    options.destination ??
    (options.pretty
      ? (require('pino-pretty') as typeof import('pino-pretty'))({ destination: 2, sync: true })
      : pino.destination({ dest: 2, sync: true }));
  return pino(
    {
      level: options.level ?? 'info',
      base: undefined,
      timestamp: pino.stdTimeFunctions.isoTime,
      formatters: { level: (label) => ({ level: label }) },
      mixin: scopeFields,
      serializers: { error: errorCause, err: errorCause },
      redact: { paths: SECRET_FIELDS.flatMap((f) => [f, `*.${f}`]), censor: '[redacted]' },
    },
    destination,
  );
}

const env = process.env;
let logger = createLogger({ level: (env.LOG_LEVEL as LogLevel) ?? 'info', pretty: env.LOG_FORMAT === 'pretty' });

/** Changes the level of every line from now on. */
export function setLogLevel(level: LogLevel): void {
  logger.level = level;
}

/** Sends every line to `destination` (tests read them) until the returned function puts stderr back. */
export function captureLogs(destination: DestinationStream, level: LogLevel = 'debug'): () => void {
  const previous = logger;
  logger = createLogger({ level, destination });
  return () => {
    logger = previous;
  };
}

/** The process's logger: `log.info('what happened', { field: value })`; an `error` field may be an Error. */
export const log = {
  debug: (msg: string, fields: Record<string, unknown> = {}) => logger.debug(fields, msg),
  info: (msg: string, fields: Record<string, unknown> = {}) => logger.info(fields, msg),
  warn: (msg: string, fields: Record<string, unknown> = {}) => logger.warn(fields, msg),
  error: (msg: string, fields: Record<string, unknown> = {}) => logger.error(fields, msg),
};

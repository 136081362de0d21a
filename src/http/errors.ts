/** What a 503 service_unavailable tells clients to wait before retrying: a few of the deadlines that caused it. */
export const SERVICE_UNAVAILABLE_RETRY_AFTER_SECONDS = 5;

/** One entry of an error's `details`: which field, and a stable token for what is wrong with it. */
export interface ErrorDetail {
  field?: string;
  issue: string;
}

/** The one error class both APIs throw; each API's error middleware turns it into its envelope. */
export class ApiError extends Error {
  constructor(
    readonly status: number,
    readonly code: string,
    message: string,
    readonly details: ErrorDetail[] = [],
    readonly headers: Record<string, string> = {},
  ) {
    super(message);
    this.name = 'ApiError';
  }

  static validation(message: string, details: ErrorDetail[] = [], status = 400): ApiError {
    return new ApiError(status, 'validation_error', message, details);
  }

  static unauthorized(code = 'invalid_api_key', message = 'Missing or invalid API key.'): ApiError {
    return new ApiError(401, code, message);
  }

  static insufficientScope(scope: string): ApiError {
    return new ApiError(403, 'insufficient_scope', `This key lacks the ${scope} scope.`);
  }

  static forbidden(code: string, message: string): ApiError {
    return new ApiError(403, code, message);
  }

  static notFound(code: string, message = 'No such object.'): ApiError {
    return new ApiError(404, code, message);
  }

  static conflict(code: string, message: string): ApiError {
    return new ApiError(409, code, message);
  }

  static rateLimited(retryAfterSeconds: number, message = 'Too many requests.'): ApiError {
    return new ApiError(429, 'rate_limited', message, [], {
      'Retry-After': String(retryAfterSeconds),
    });
  }

  /** A dependency (Postgres, Temporal) did not answer within its deadline: the client should retry after `retryAfterSeconds`. */
  static serviceUnavailable(retryAfterSeconds = SERVICE_UNAVAILABLE_RETRY_AFTER_SECONDS): ApiError {
    return new ApiError(
      503,
      'service_unavailable',
      'The service could not answer in time. Retry after the number of seconds in Retry-After.',
      [],
      { 'Retry-After': String(retryAfterSeconds) },
    );
  }

  static internal(): ApiError {
    return new ApiError(500, 'internal_error', 'An unexpected error occurred. Retry with backoff.');
  }
}

/** The framework-shape refusal (`{message, type}`) for malformed or over-size bodies. */
export class BodyError extends Error {
  constructor(
    readonly status: number,
    readonly type: string,
    message: string,
  ) {
    super(message);
    this.name = 'BodyError';
  }
}

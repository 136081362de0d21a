import type { Context, Middleware } from 'koa';
import type { Db } from '../db/knex';
import type { Clock } from '../lib/clock';
import { ApiError } from './errors';

/** A fixed-window limit: at most `limit` hits per `windowSeconds`, windows aligned to the epoch. */
export interface WindowLimit {
  limit: number;
  windowSeconds: number;
}

export interface HitResult {
  allowed: boolean;
  count: number;
  /** Whole seconds until the current window resets (at least 1). */
  retryAfter: number;
}

/** Counts one hit on `bucket` in Postgres (shared by every API process) and says whether it fits. */
export async function hit(
  db: Db,
  bucket: string,
  { limit, windowSeconds }: WindowLimit,
  now: Date,
): Promise<HitResult> {
  const window = windowOf({ limit, windowSeconds }, now);
  const { rows } = await db.raw(`${COUNT_HIT} VALUES (?, ?, 1) ${COUNT_HIT_CONFLICT}`, [bucket, window.start]);
  return window.result(Number(rows[0].count));
}

/** The statement that counts one hit: `${COUNT_HIT} VALUES … ${COUNT_HIT_CONFLICT}` (or a SELECT). */
export const COUNT_HIT = 'INSERT INTO rate_limit_windows (bucket, window_start, count)';
export const COUNT_HIT_CONFLICT =
  'ON CONFLICT (bucket, window_start) DO UPDATE SET count = rate_limit_windows.count + 1 RETURNING count';

/** The window `now` falls in, and how a count in it is judged. */
export function windowOf({ limit, windowSeconds }: WindowLimit, now: Date) {
  const windowMs = windowSeconds * 1000;
  const start = Math.floor(now.getTime() / windowMs) * windowMs;
  const retryAfter = Math.max(1, Math.ceil((start + windowMs - now.getTime()) / 1000));
  return {
    start: new Date(start),
    result: (count: number): HitResult => ({ allowed: count <= limit, count, retryAfter }),
  };
}

/** `429 rate_limited` with `Retry-After` for a refused hit. */
export function rateLimitedError(result: HitResult, { limit, windowSeconds }: WindowLimit): ApiError {
  return ApiError.rateLimited(result.retryAfter, `Rate limit of ${limit} requests per ${windowSeconds} s exceeded.`);
}

/**
 * The IETF httpapi RateLimit fields (draft-ietf-httpapi-ratelimit-headers) for one counted request:
 * `RateLimit-Policy: "<policy>";q=<limit>;w=<window s>` and `RateLimit: "<policy>";r=<remaining>;t=<s to reset>`.
 */
export function rateLimitHeaders(policy: string, limit: WindowLimit, result: HitResult): Record<string, string> {
  return {
    'RateLimit-Policy': `"${policy}";q=${limit.limit};w=${limit.windowSeconds}`,
    RateLimit: `"${policy}";r=${Math.max(0, limit.limit - result.count)};t=${result.retryAfter}`,
  };
}

/**
 * Counts the request against `limit` under policy `policy` (bucket `bucket(ctx)`) and tells the
 * client where it stands in RateLimit headers on whatever answer follows; over the limit it is
 * `429 rate_limited` with `Retry-After`.
 */
export function rateLimit(
  db: Db,
  clock: Clock,
  policy: string,
  limit: WindowLimit,
  bucket: (ctx: Context) => string,
): Middleware {
  return async (ctx, next) => {
    const result = await hit(db, bucket(ctx), limit, clock());
    ctx.set(rateLimitHeaders(policy, limit, result));
    if (!result.allowed) throw rateLimitedError(result, limit);
    return next();
  };
}

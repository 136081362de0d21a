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
  const windowMs = windowSeconds * 1000;
  const start = Math.floor(now.getTime() / windowMs) * windowMs;
  const { rows } = await db.raw(
    `INSERT INTO rate_limit_windows (bucket, window_start, count) VALUES (?, ?, 1)
     ON CONFLICT (bucket, window_start) DO UPDATE SET count = rate_limit_windows.count + 1
     RETURNING count`,
    [bucket, new Date(start)],
  );
  const count = Number(rows[0].count);
  const retryAfter = Math.max(1, Math.ceil((start + windowMs - now.getTime()) / 1000));
  return { allowed: count <= limit, count, retryAfter };
}

/** Refuses with `429 rate_limited` and `Retry-After` once `bucket(ctx)` is over `limit` in its window. */
export function rateLimit(db: Db, clock: Clock, limit: WindowLimit, bucket: (ctx: Context) => string): Middleware {
  return async (ctx, next) => {
    const result = await hit(db, bucket(ctx), limit, clock());
    if (!result.allowed) {
      throw ApiError.rateLimited(
        result.retryAfter,
        `Rate limit of ${limit.limit} requests per ${limit.windowSeconds} s exceeded.`,
      );
    }
    return next();
  };
}

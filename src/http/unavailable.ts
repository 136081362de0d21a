import type { Context } from 'koa';
import { postgresDeadlineOf } from '../db/deadlines';
import { log } from '../lib/log';
import { apiOf, dependencyUnavailableTotal } from '../telemetry/http';
import { temporalDeadlineOf } from '../temporal/deadlines';
import { routeTemplate } from './request-log';

/** A dependency that could not answer in time, and the deadline (its setting's name) that ended the wait. */
export interface UnavailableDependency {
  dependency: 'postgres' | 'temporal';
  deadline: string;
}

/** What `err` says about a dependency that could not answer in time or at all; undefined for any other error. */
export function unavailableDependencyOf(err: unknown): UnavailableDependency | undefined {
  const postgres = postgresDeadlineOf(err);
  if (postgres) return { dependency: 'postgres', deadline: postgres };
  const temporal = temporalDeadlineOf(err);
  if (temporal) return { dependency: 'temporal', deadline: temporal };
  return undefined;
}

/**
 * When `err` is a dependency that could not answer in time, logs it (which dependency, which
 * deadline) and counts it, for the caller to answer 503 with Retry-After; false for any other error.
 */
export function dependencyUnavailable(ctx: Context, err: unknown): boolean {
  const unavailable = unavailableDependencyOf(err);
  if (!unavailable) return false;
  log.warn(`${unavailable.dependency} did not answer in time: answered 503`, {
    ...unavailable,
    method: ctx.method,
    route: routeTemplate(ctx),
    error: err,
  });
  dependencyUnavailableTotal.inc({ api: apiOf(ctx.path), dependency: unavailable.dependency });
  return true;
}

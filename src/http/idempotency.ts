import type { Context, Middleware } from 'koa';
import type { Knex } from 'knex';
import type { Db } from '../db/knex';
import type { Clock } from '../lib/clock';
import { canonicalJson, sha256Hex } from '../lib/hash';
import { ApiError } from './errors';
import { apiOf, idempotency } from '../telemetry/http';
import { COUNT_HIT, COUNT_HIT_CONFLICT, rateLimitedError, rateLimitHeaders, windowOf, WindowLimit } from './rate-limit';

/** How long a first outcome is kept against its key. */
export const IDEMPOTENCY_TTL_MS = 24 * 60 * 60 * 1000;
/** A Partner request still `in_progress` after this long is taken to have died; it settles as a stored 500. */
export const IN_PROGRESS_LEASE_MS = 2 * 60 * 1000;

const CHECKOUT_KEY_PATTERN = /^[A-Za-z0-9_-]{8,128}$/;

/** Renders an error into the API's envelope on `ctx` (status, headers, body). */
export type ErrorRenderer = (ctx: Context, err: unknown) => void;

interface RecordRow {
  route: string;
  body_hash: string;
  state: 'in_progress' | 'done';
  response_status: number | null;
  response_body: unknown;
  created_at: Date;
}

/**
 * Makes the statement it is part of commit without waiting for its WAL flush. Used for claims: the
 * request's own writes commit later with a flush that covers the claim, so a claim lost in a crash
 * means none of the request's writes survived either, and running it again is right.
 */
const ASYNC_COMMIT = `(SELECT set_config('synchronous_commit', 'off', true)) AS async_commit`;

const abandonedError = () =>
  new ApiError(
    500,
    'internal_error',
    'The first request with this Idempotency-Key did not finish. Check the current state, then resend under a new key.',
  );

const bodyHash = (ctx: Context) => sha256Hex(canonicalJson(ctx.request.body ?? null));

function replay(ctx: Context, row: RecordRow): void {
  ctx.status = row.response_status!;
  ctx.body = row.response_body;
  ctx.set('Idempotent-Replayed', 'true');
  idempotency.inc({ api: apiOf(ctx.path), outcome: 'replayed' });
}

async function runAndRender(ctx: Context, next: () => Promise<unknown>, render: ErrorRenderer): Promise<void> {
  try {
    await next();
  } catch (err) {
    render(ctx, err);
  }
}

async function store(db: Db, scope: string, key: string, ctx: Context, now: Date): Promise<void> {
  await db.raw(
    `UPDATE idempotency_records SET state = 'done', response_status = ?, response_body = ?, completed_at = ?
      WHERE scope = ? AND key = ?`,
    [ctx.status, JSON.stringify(ctx.body ?? null), now, scope, key],
  );
}

/** A rate limit counted by the statement that claims the key: a replay is answered before it and not counted. */
export interface CountedLimit {
  policy: string;
  limit: WindowLimit;
  /** The bucket of the request made with the key `keyId`. */
  bucket: (keyId: string) => string;
}

/** What claiming a Partner Idempotency-Key writes: the record `in_progress`, and the hit when counted. */
export interface PartnerClaim {
  scope: string;
  key: string;
  route: string;
  hash: string;
  now: Date;
  hit: { bucket: string; windowStart: Date } | null;
}

/** How a claim came out: whether it took the key, and the window's count when it counted one. */
export interface ClaimOutcome {
  claimed: boolean;
  hits: number | null;
}

/**
 * The CTEs `claim` (the record, unless one holds the key already) and `hit` (the request counted
 * in its window when it claimed and is counted), writing only where the SQL `guard` holds; the
 * bindings in their order in the text.
 */
export function partnerClaimCtes(
  c: PartnerClaim,
  guard: { sql: string; bindings: readonly Knex.Value[] } = { sql: 'true', bindings: [] },
): { sql: string; bindings: Knex.Value[] } {
  return {
    sql: `claim AS (
       INSERT INTO idempotency_records (scope, key, route, body_hash, state, created_at)
       SELECT ?, ?, ?, ?, 'in_progress', ? FROM ${ASYNC_COMMIT} WHERE ${guard.sql}
       ON CONFLICT (scope, key) DO NOTHING RETURNING 1
     ), hit AS (
       ${COUNT_HIT} SELECT ?, ?, 1 FROM claim WHERE ?::boolean ${COUNT_HIT_CONFLICT}
     )`,
    bindings: [
      c.scope,
      c.key,
      c.route,
      c.hash,
      c.now,
      ...guard.bindings,
      c.hit?.bucket ?? '',
      c.hit?.windowStart ?? c.now,
      c.hit !== null,
    ],
  };
}

declare module 'koa' {
  interface DefaultState {
    /** The claim the key check already tried in its own statement (Partner write routes). */
    partnerClaim?: { claim: PartnerClaim; outcome: ClaimOutcome };
  }
}

/** Why a Partner Idempotency-Key header is refused (missing, or over 255 characters), or null. */
function partnerKeyProblem(key: string): ApiError | null {
  if (key === '')
    return new ApiError(400, 'idempotency_key_required', 'This route requires an Idempotency-Key header.');
  if (key.length > 255) {
    return ApiError.validation('Idempotency-Key must be 1 to 255 characters.', [
      { field: 'Idempotency-Key', issue: 'invalid' },
    ]);
  }
  return null;
}

/** The Partner Idempotency-Key middleware, and the claim the key check may try first (one round trip fewer). */
export interface PartnerIdempotency {
  middleware: Middleware;
  /** The claim for this request under the key `keyId`, or null when the header is to be refused. */
  claimFor(ctx: Context, keyId: string): PartnerClaim | null;
}

/**
 * Partner semantics: the first outcome is stored 24 h per API key; a second request with the key
 * while the first runs is `409 idempotency_key_in_progress`; another body or route is
 * `409 idempotency_key_conflict`; a refusal (4xx) stores nothing, a 500 is stored and replayed.
 * With `counted`, the claim counts the request against that limit in the same statement; over it,
 * the request is refused as `rateLimit` would, and the claim dropped. The key check may have
 * tried the claim already (`claimFor`, `ctx.state.partnerClaim`); otherwise it is tried here.
 */
export function partnerIdempotency(
  db: Db,
  clock: Clock,
  route: string,
  render: ErrorRenderer,
  counted?: CountedLimit,
): PartnerIdempotency {
  const claimFor = (ctx: Context, keyId: string): PartnerClaim | null => {
    const key = ctx.get('idempotency-key');
    if (partnerKeyProblem(key)) return null;
    const now = clock();
    const window = counted && windowOf(counted.limit, now);
    return {
      scope: `partner:${keyId}`,
      key,
      route,
      hash: bodyHash(ctx),
      now,
      hit: counted && window ? { bucket: counted.bucket(keyId), windowStart: window.start } : null,
    };
  };

  const middleware: Middleware = async (ctx, next) => {
    const key = ctx.get('idempotency-key');
    const problem = partnerKeyProblem(key);
    if (problem) throw problem;
    const tried = ctx.state.partnerClaim;
    const claim = tried?.claim ?? claimFor(ctx, ctx.state.partner.keyId)!;
    const { scope, hash, now } = claim;
    let outcome: ClaimOutcome | undefined = tried?.outcome;
    for (;;) {
      if (!outcome) {
        const { sql, bindings } = partnerClaimCtes(claim);
        const { rows } = await db.raw(`WITH ${sql} SELECT (SELECT count FROM hit) AS hits FROM claim`, bindings);
        outcome = { claimed: rows.length > 0, hits: rows[0]?.hits ?? null };
      }
      if (outcome.claimed) break;
      outcome = undefined;
      const row: RecordRow | undefined = await db('idempotency_records').where({ scope, key }).first();
      if (!row) continue; // purged between the two statements
      const age = now.getTime() - row.created_at.getTime();
      if (age >= IDEMPOTENCY_TTL_MS) {
        await db('idempotency_records').where({ scope, key, created_at: row.created_at }).delete();
        continue;
      }
      if (row.route !== route || row.body_hash !== hash) {
        idempotency.inc({ api: apiOf(ctx.path), outcome: 'conflict' });
        throw ApiError.conflict(
          'idempotency_key_conflict',
          'This Idempotency-Key was used with another body or route.',
        );
      }
      if (row.state === 'in_progress' && age < IN_PROGRESS_LEASE_MS) {
        idempotency.inc({ api: apiOf(ctx.path), outcome: 'in_progress' });
        throw ApiError.conflict(
          'idempotency_key_in_progress',
          'The first request with this Idempotency-Key is still running; retry shortly.',
        );
      }
      if (row.state === 'in_progress') {
        // The first request died after claiming the key and its writes may have happened, so it
        // is never run again: it is settled as a stored 500, like any failure after work began.
        render(ctx, abandonedError());
        await db('idempotency_records')
          .where({ scope, key, state: 'in_progress', created_at: row.created_at })
          .update({
            state: 'done',
            response_status: ctx.status,
            response_body: JSON.stringify(ctx.body),
            completed_at: now,
          });
        ctx.set('Idempotent-Replayed', 'true');
        return;
      }
      return replay(ctx, row);
    }

    await runAndRender(
      ctx,
      () => {
        if (counted) {
          const hit = windowOf(counted.limit, now).result(outcome!.hits!);
          ctx.set(rateLimitHeaders(counted.policy, counted.limit, hit));
          if (!hit.allowed) throw rateLimitedError(hit, counted.limit);
        }
        return next();
      },
      render,
    );
    if (ctx.status >= 400 && ctx.status < 500) {
      await db('idempotency_records').where({ scope, key, state: 'in_progress' }).delete();
    } else {
      await store(db, scope, key, ctx, clock());
    }
  };
  return { middleware, claimFor };
}

/**
 * In one statement: claims `key` as `in_progress` when it is free or its record has expired, and
 * returns whether it did and the record as it was when the statement began (a live record is left
 * as it is).
 */
async function claimCheckoutKey(
  db: Db,
  r: { scope: string; key: string; route: string; hash: string; now: Date },
): Promise<{ claimed: boolean; before: RecordRow | undefined }> {
  const { rows } = await db.raw(
    `WITH claim AS (
       INSERT INTO idempotency_records (scope, key, route, body_hash, state, created_at)
       SELECT ?, ?, ?, ?, 'in_progress', ? FROM ${ASYNC_COMMIT}
       ON CONFLICT (scope, key) DO UPDATE SET route = EXCLUDED.route, body_hash = EXCLUDED.body_hash,
         state = 'in_progress', response_status = NULL, response_body = NULL, created_at = EXCLUDED.created_at,
         completed_at = NULL
       WHERE idempotency_records.created_at < ?
       RETURNING 1
     )
     SELECT EXISTS (SELECT 1 FROM claim) AS claimed, r.*
       FROM (SELECT 1) AS one LEFT JOIN idempotency_records r ON r.scope = ? AND r.key = ?`,
    [r.scope, r.key, r.route, r.hash, r.now, new Date(r.now.getTime() - IDEMPOTENCY_TTL_MS), r.scope, r.key],
  );
  const { claimed, ...before } = rows[0];
  return { claimed, before: before.scope === null ? undefined : (before as RecordRow) };
}

/**
 * Checkout semantics: key required (8–128 of A-Za-z0-9_-), scoped to merchant, mode and route;
 * same body replays, another body or route is a conflict, a key still in flight (or whose first
 * attempt crashed) is processed again and its newer response stored. 5xx and 429 are not stored.
 */
export function checkoutIdempotency(db: Db, clock: Clock, route: string, render: ErrorRenderer): Middleware {
  return async (ctx, next) => {
    const key = ctx.get('idempotency-key');
    if (!CHECKOUT_KEY_PATTERN.test(key)) {
      throw new ApiError(
        400,
        'idempotency_key_required',
        'This route requires an Idempotency-Key header of 8 to 128 characters of A-Za-z0-9_-.',
        [{ field: 'Idempotency-Key', issue: key === '' ? 'missing' : 'invalid' }],
      );
    }
    const { merchantId, mode } = ctx.state.checkout;
    const scope = `checkout:${merchantId}:${mode}`;
    const hash = bodyHash(ctx);
    const now = clock();

    /** The record if it is younger than 24 h; a conflict when it is another request's. */
    const liveOf = (row: RecordRow | undefined) => {
      const live = row && now.getTime() - row.created_at.getTime() < IDEMPOTENCY_TTL_MS ? row : undefined;
      if (live && (live.route !== route || live.body_hash !== hash)) {
        idempotency.inc({ api: apiOf(ctx.path), outcome: 'conflict' });
        throw ApiError.conflict(
          'idempotency_key_conflict',
          'This Idempotency-Key was used with another body or route.',
        );
      }
      return live;
    };
    const { claimed, before } = await claimCheckoutKey(db, { scope, key, route, hash, now });
    let live = claimed ? undefined : liveOf(before);
    // Another request claimed the key after this statement began: read what it wrote.
    if (!claimed && !live) live = liveOf(await db('idempotency_records').where({ scope, key }).first());
    if (live?.state === 'done') return replay(ctx, live);

    await runAndRender(ctx, next, render);
    if (ctx.status < 500 && ctx.status !== 429) await store(db, scope, key, ctx, clock());
  };
}

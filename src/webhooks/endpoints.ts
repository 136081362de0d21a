/** Endpoint management: create, list, update, delete an endpoint and rotate its secret (the API side, no delivery). */
import { ApiError } from '../http/errors';
import { canonicalJson, sha256Hex } from '../lib/hash';
import { newId } from '../lib/ids';
import { log } from '../lib/log';
import type { MerchantScope, WebhookDeps } from './deps';
import { signalEndpointDeleted } from '../temporal/delivery';
import type { EndpointRow } from './endpoint-row';
import { ROTATION_OVERLAP_MS } from './schedule';
import type { EndpointIn, EndpointPatch } from './schemas';
import { newSigningSecret } from './sign';
import { checkWebhookUrl } from './url-safety';
import type { WebhookRuntime } from './runtime';

export const endpointNotFound = () => ApiError.notFound('endpoint_not_found', 'No such webhook endpoint.');
const notFound = endpointNotFound;

/** Refuses an unsafe target with `400 validation_error`, details `[{ field: 'url', issue }]`. */
async function assertSafeUrl(runtime: WebhookRuntime, url: string): Promise<void> {
  const check = await checkWebhookUrl(url, runtime);
  if (!check.ok) throw ApiError.validation(check.message, [{ field: 'url', issue: check.issue }]);
}

/** The arbiter of creates under one Idempotency-Key and request. */
const ONE_PER_REQUEST = '(merchant_id, mode, idempotency_key, request_hash) WHERE idempotency_key IS NOT NULL';

/**
 * `POST /webhook_endpoints`: registers an enabled endpoint of the key's mode; the secret is returned
 * only here. Creates with the same Idempotency-Key and request converge on one endpoint (a unique
 * index): one inserts, the others (concurrent ones, or one after the 24-hour record is gone) answer
 * with that endpoint and its current secret. Another request under an old key makes its own.
 */
export async function createEndpoint(
  deps: WebhookDeps,
  scope: MerchantScope,
  input: EndpointIn,
  idempotencyKey: string,
): Promise<{ endpoint: EndpointRow; secret: string }> {
  if (input.mode !== scope.mode) {
    throw ApiError.forbidden('mode_mismatch', `A ${scope.mode} key cannot register a ${input.mode} endpoint.`);
  }
  await assertSafeUrl(deps.runtime, input.url);
  const requestHash = sha256Hex(canonicalJson(input));
  const same = { merchant_id: scope.merchantId, mode: scope.mode, idempotency_key: idempotencyKey };
  // Twice at most: an earlier endpoint deleted between the two statements leaves the way free.
  for (let attempt = 0; attempt < 2; attempt++) {
    const created = await insertEndpoint(deps, scope, input, { idempotencyKey, requestHash });
    if (created) return created;
    const earlier: EndpointRow | undefined = await deps
      .db('webhook_endpoints')
      .where({ ...same, request_hash: requestHash })
      .first();
    if (earlier)
      return { endpoint: earlier, secret: deps.runtime.cipher.decrypt(earlier.secret_ciphertext, earlier.id) };
  }
  throw new Error('webhook endpoint create kept colliding with a deleted one');
}

async function insertEndpoint(
  deps: WebhookDeps,
  scope: MerchantScope,
  input: EndpointIn,
  request: { idempotencyKey: string; requestHash: string },
): Promise<{ endpoint: EndpointRow; secret: string } | null> {
  const id = newId('we');
  const secret = newSigningSecret();
  const now = deps.clock();
  const [endpoint] = await deps
    .db('webhook_endpoints')
    .insert({
      id,
      merchant_id: scope.merchantId,
      mode: scope.mode,
      url: input.url,
      events: JSON.stringify(input.events),
      status: 'enabled',
      description: input.description ?? null,
      secret_ciphertext: deps.runtime.cipher.encrypt(secret, id),
      idempotency_key: request.idempotencyKey,
      request_hash: request.requestHash,
      created_at: now,
      updated_at: now,
    })
    .onConflict(deps.db.raw(ONE_PER_REQUEST))
    .ignore()
    .returning('*');
  return endpoint ? { endpoint, secret } : null;
}

/** The merchant's endpoints in this mode, newest first. */
export async function listEndpoints(deps: Pick<WebhookDeps, 'db'>, scope: MerchantScope): Promise<EndpointRow[]> {
  return deps
    .db('webhook_endpoints')
    .where({ merchant_id: scope.merchantId, mode: scope.mode })
    .orderBy([
      { column: 'created_at', order: 'desc' },
      { column: 'id', order: 'desc' },
    ]);
}

/** The merchant's endpoint in this mode; another merchant's or mode's is `404 endpoint_not_found`. */
export async function getEndpoint(
  deps: Pick<WebhookDeps, 'db'>,
  scope: MerchantScope,
  id: string,
): Promise<EndpointRow> {
  const row = await deps.db('webhook_endpoints').where({ id, merchant_id: scope.merchantId, mode: scope.mode }).first();
  if (!row) throw notFound();
  return row;
}

/**
 * `PATCH /webhook_endpoints/{id}`: url (checked again), events, status, description. Enabling a
 * disabled endpoint clears disabled_reason and restarts its failure clock.
 */
export async function updateEndpoint(
  deps: WebhookDeps,
  scope: MerchantScope,
  id: string,
  patch: EndpointPatch,
): Promise<EndpointRow> {
  if (patch.url !== undefined) await assertSafeUrl(deps.runtime, patch.url);
  const { db } = deps;
  const changes: Record<string, unknown> = { updated_at: deps.clock() };
  if (patch.url !== undefined) changes.url = patch.url;
  if (patch.events !== undefined) changes.events = JSON.stringify(patch.events);
  if (patch.description !== undefined) changes.description = patch.description;
  if (patch.status === 'enabled') {
    changes.status = 'enabled';
    changes.disabled_reason = null;
    changes.failing_since = db.raw(`CASE WHEN status = 'disabled' THEN NULL ELSE failing_since END`);
  } else if (patch.status === 'disabled') {
    changes.status = 'disabled';
    changes.disabled_reason = db.raw(`CASE WHEN status = 'disabled' THEN disabled_reason ELSE NULL END`);
  }
  const [row] = await db('webhook_endpoints')
    .where({ id, merchant_id: scope.merchantId, mode: scope.mode })
    .update(changes)
    .returning('*');
  if (!row) throw notFound();
  return row;
}

/**
 * `DELETE /webhook_endpoints/{id}`: deletes the row (its secrets with it), then tells the delivery
 * workflow (started if none runs), which records the endpoint's pending rows as `endpoint_deleted`
 * and stops. Should the signal not arrive, the workflow's next look at the queue finds the
 * endpoint gone and does the same.
 */
export async function deleteEndpoint(deps: WebhookDeps, scope: MerchantScope, id: string): Promise<void> {
  const [deleted] = await deps
    .db('webhook_endpoints')
    .where({ id, merchant_id: scope.merchantId, mode: scope.mode })
    .delete()
    .returning(['id', 'url']);
  if (!deleted) throw notFound();
  const merchant = await deps.db('merchants').where({ id: scope.merchantId }).first('display_name');
  const target = {
    id,
    url: deleted.url,
    merchantId: scope.merchantId,
    mode: scope.mode,
    merchantName: merchant?.display_name ?? '',
  };
  try {
    await signalEndpointDeleted(deps.temporal, deps.taskQueue, target);
  } catch (err) {
    log.warn('could not signal the delivery workflow of a deleted endpoint', {
      endpoint_id: id,
      error: err,
    });
  }
}

/**
 * `POST /webhook_endpoints/{id}/rotate_secret`: a new secret signs from now on; the one it replaces
 * keeps signing beside it for 24 hours (an older one still in its overlap stops at once).
 */
export async function rotateSecret(
  deps: WebhookDeps,
  scope: MerchantScope,
  id: string,
): Promise<{ endpoint: EndpointRow; secret: string }> {
  const secret = newSigningSecret();
  const now = deps.clock();
  const [endpoint] = await deps
    .db('webhook_endpoints')
    .where({ id, merchant_id: scope.merchantId, mode: scope.mode })
    .update({
      previous_secret_ciphertext: deps.db.ref('secret_ciphertext'),
      previous_secret_expires_at: new Date(now.getTime() + ROTATION_OVERLAP_MS),
      secret_ciphertext: deps.runtime.cipher.encrypt(secret, id),
      updated_at: now,
    })
    .returning('*');
  if (!endpoint) throw notFound();
  return { endpoint, secret };
}

/** Developers › API keys: a merchant's Checkout keys of the session's mode, through the ops CLI's key services. */
import type { Context } from 'koa';
import { Html, html } from '../hosted/html';
import { iso } from '../lib/time';
import { createCheckoutKey, revokeCheckoutKey, rollCheckoutKey } from '../ops/checkout-keys';
import { OpsError } from '../ops/errors';
import { audit } from './audit';
import { ConsoleDeps, forbidden, render, stateOf } from './context';
import { lastUsedCell } from './last-used-cell';
import { csrfField, notice, scrollRegion } from './layout';
import { ct } from './messages';
import { scopeOf } from './webhook-pages';

export const API_KEYS = '/console/developers/keys';
/** How long the old key of a roll keeps working, as offered (seconds). */
export const ROLL_EXPIRIES = [0, 3_600, 86_400, 7 * 86_400] as const;

type PageOpts = { status?: number; ok?: string | null; error?: string | null; shown?: string | null };

/** `svc_ck_test_<id>_…`: what identifies a key without its secret. */
const prefixOf = (k: { id: string; type: string; mode: string }) =>
  `svc_${k.type === 'secret' ? 'ck' : 'pk'}_${k.mode}_${k.id}_…`;

function expiryLabel(ctx: Context, seconds: number): string {
  const { lang } = stateOf(ctx);
  if (seconds === 0) return ct(lang, 'expire_now');
  return seconds < 86_400
    ? ct(lang, 'expire_hours', { n: seconds / 3_600 })
    : ct(lang, 'expire_days', { n: seconds / 86_400 });
}

/** The keys list (hosted page keys are the service's own and not listed), and the create form. */
export async function keysPage(deps: ConsoleDeps, ctx: Context, opts: PageOpts = {}) {
  const { lang, csrf } = stateOf(ctx);
  const scope = scopeOf(ctx);
  const now = deps.clock();
  const keys: Array<{
    id: string;
    type: string;
    mode: string;
    created_at: Date;
    revoked_at: Date | null;
    last_used_at: Date | null;
  }> = await deps
    .db('checkout_keys')
    .where({ merchant_id: scope.merchantId, mode: scope.mode })
    .whereNotIn('id', deps.db('hosted_page_keys').select('key_id'))
    .orderBy([
      { column: 'created_at', order: 'desc' },
      { column: 'id', order: 'desc' },
    ])
    .select('id', 'type', 'mode', 'created_at', 'revoked_at', 'last_used_at');
  const live = (k: { revoked_at: Date | null }) => !k.revoked_at || k.revoked_at > now;
  const actions = (k: { id: string; revoked_at: Date | null }): Html =>
    html`<form method="post" action="${API_KEYS}/${k.id}/roll" class="stack">
        ${csrfField(csrf)}
        <label
          >${ct(lang, 'old_key_expires')}
          <select name="expires_in">
            ${ROLL_EXPIRIES.map((s) => html`<option value="${s}">${expiryLabel(ctx, s)}</option>`)}
          </select></label
        >
        <button type="submit" class="secondary">${ct(lang, 'roll_key')}</button>
      </form>
      <form method="post" action="${API_KEYS}/${k.id}/revoke">
        ${csrfField(csrf)}
        <button type="submit" class="danger">${ct(lang, 'revoke')} ${k.id}</button>
      </form>`;
  render(
    ctx,
    opts.status ?? 200,
    ct(lang, 'api_keys_title'),
    html`${notice('ok', opts.ok)} ${notice('error', opts.error)}
      ${
        opts.shown &&
        html`<section aria-labelledby="new-key">
          <h2 id="new-key">${ct(lang, 'new_key_title')}</h2>
          <p>${ct(lang, 'new_key_help')}</p>
          <p class="secret" id="new-key-value">${opts.shown}</p>
        </section>`
      }
      ${
        keys.length === 0
          ? html`<p>${ct(lang, 'no_keys')}</p>`
          : html`<div ${scrollRegion(ct(lang, 'api_keys_title'))}>
              <table>
                <thead>
                  <tr>
                    <th>${ct(lang, 'key_id')}</th>
                    <th>${ct(lang, 'key_type')}</th>
                    <th>${ct(lang, 'key_env')}</th>
                    <th>${ct(lang, 'created')}</th>
                    <th>${ct(lang, 'last_used')}</th>
                    <th>${ct(lang, 'status')}</th>
                    <th>${ct(lang, 'actions')}</th>
                  </tr>
                </thead>
                <tbody>
                  ${keys.map(
                    (k) =>
                      html`<tr id="key-${k.id}">
                        <td class="mono">${prefixOf(k)}</td>
                        <td>${ct(lang, k.type === 'secret' ? 'secret_key' : 'publishable_key')}</td>
                        <td>${k.mode}</td>
                        <td class="mono">${iso(k.created_at)}</td>
                        ${lastUsedCell(lang, k.last_used_at)}
                        <td>
                          ${
                            !k.revoked_at
                              ? ct(lang, 'active')
                              : live(k)
                                ? ct(lang, 'expires_at', { at: iso(k.revoked_at) })
                                : html`${ct(lang, 'revoked')} <span class="mono">${iso(k.revoked_at)}</span>`
                          }
                        </td>
                        <td>${live(k) ? actions(k) : ''}</td>
                      </tr>`,
                  )}
                </tbody>
              </table>
            </div>`
      }
      <h2>${ct(lang, 'create_key')}</h2>
      <form method="post" action="${API_KEYS}" class="stack">
        ${csrfField(csrf)}
        <label
          >${ct(lang, 'key_type')}
          <select name="type">
            <option value="secret">${ct(lang, 'secret_key')}</option>
            <option value="publishable">${ct(lang, 'publishable_key')}</option>
          </select></label
        >
        <button type="submit">${ct(lang, 'create_key')}</button>
      </form>`,
    API_KEYS,
  );
}

const audited = (
  deps: ConsoleDeps,
  ctx: Context,
  action: string,
  target: string,
  outcome: 'success' | 'denied',
  detail?: Record<string, unknown>,
) =>
  audit(deps.db, ctx, {
    user: stateOf(ctx).session!.user,
    action,
    target,
    outcome,
    detail: outcome === 'success' ? { mode: stateOf(ctx).mode, ...detail } : undefined,
    at: deps.clock(),
  });

/** A key of another merchant or mode (or none, or no longer live): 403, audited, the same either way. */
async function refusedKey(deps: ConsoleDeps, ctx: Context, err: unknown, action: string, keyId: string) {
  if (!(err instanceof OpsError) || err.code !== 'key_not_found') throw err;
  await audited(deps, ctx, action, keyId, 'denied');
  forbidden(ctx);
}

/** Creates a secret or publishable key of the session's mode (re-authenticated), shown once. */
export async function createKeyAction(deps: ConsoleDeps, ctx: Context) {
  const { lang, form } = stateOf(ctx);
  const { merchantId, mode } = scopeOf(ctx);
  const type = form.get('type');
  if (type !== 'secret' && type !== 'publishable')
    return keysPage(deps, ctx, { status: 422, error: ct(lang, 'choose_key_type') });
  // As `checkout-key create --mode live`: no live key while secrets are sealed with the public development key.
  if (mode === 'live' && !deps.liveKeysAllowed)
    return keysPage(deps, ctx, { status: 409, error: ct(lang, 'live_keys_need_secret_key') });
  const key = await createCheckoutKey(deps.db, { merchantId, mode, type });
  await audited(deps, ctx, 'checkout_key_create', key.key_id, 'success', { type });
  return keysPage(deps, ctx, { status: 201, shown: key.key, ok: ct(lang, 'key_created', { key: key.key_id }) });
}

/** Rolls a key (re-authenticated): a new one shown once; the old one stops after the chosen time. */
export async function rollKeyAction(deps: ConsoleDeps, ctx: Context) {
  const { lang, form } = stateOf(ctx);
  const keyId = String(ctx.params.keyId);
  const expiresIn = Number(form.get('expires_in') ?? '');
  if (!(ROLL_EXPIRIES as readonly number[]).includes(expiresIn)) {
    const mine = await deps
      .db('checkout_keys')
      .where({ id: keyId, merchant_id: scopeOf(ctx).merchantId, mode: scopeOf(ctx).mode })
      .first('id');
    if (!mine) return refusedKey(deps, ctx, new OpsError('key_not_found', keyId), 'checkout_key_roll', keyId);
    return keysPage(deps, ctx, { status: 422, error: ct(lang, 'choose_expiry') });
  }
  try {
    const rolled = await rollCheckoutKey(deps.db, { keyId, ...scopeOf(ctx), expiresInSeconds: expiresIn });
    await audited(deps, ctx, 'checkout_key_roll', keyId, 'success', {
      new_key_id: rolled.created.key_id,
      old_expires_at: rolled.old_expires_at,
    });
    return keysPage(deps, ctx, {
      status: 201,
      shown: rolled.created.key,
      ok: ct(lang, 'key_rolled', { key: keyId, at: rolled.old_expires_at }),
    });
  } catch (err) {
    return refusedKey(deps, ctx, err, 'checkout_key_roll', keyId);
  }
}

/** Revokes a key at once (the next request with it is refused). */
export async function revokeKeyAction(deps: ConsoleDeps, ctx: Context) {
  const { lang } = stateOf(ctx);
  const keyId = String(ctx.params.keyId);
  try {
    await revokeCheckoutKey(deps.db, keyId, scopeOf(ctx));
  } catch (err) {
    return refusedKey(deps, ctx, err, 'checkout_key_revoke', keyId);
  }
  await audited(deps, ctx, 'checkout_key_revoke', keyId, 'success');
  return keysPage(deps, ctx, { ok: ct(lang, 'key_revoked', { key: keyId }) });
}

import type { Context } from 'koa';
import { html } from '../hosted/html';
import { partnerScopes, PartnerScope } from '../keys/scopes';
import { iso } from '../lib/time';
import { OpsError } from '../ops/errors';
import { createPartnerKey, revokePartnerKey, setPartnerKeyScopes } from '../ops/partner-keys';
import { getOrder } from '../partner/orders';
import { audit } from './audit';
import { ConsoleDeps, forbidden, notFound, render, stateOf } from './context';
import { lastUsedCell } from './last-used-cell';
import { csrfField, notice, scrollRegion } from './layout';
import { ConsoleMessageKey, ct } from './messages';
import { Move, MOVES, moveOrderOf } from './order-moves';
import { allowed } from './roles';

const field = (ctx: Context, name: string) => (stateOf(ctx).form.get(name) ?? '').trim();
const sellerOf = (ctx: Context) => stateOf(ctx).session!.user.seller_id!;
const INTEGRATIONS = '/console/settings/integrations';

/** The scopes ticked on a form, known ones only. */
function scopesOf(ctx: Context): PartnerScope[] {
  const ticked = stateOf(ctx).form.getAll('scopes');
  return partnerScopes.filter((s) => ticked.includes(s));
}

function scopeBoxes(ctx: Context, checked: readonly string[], idPrefix: string) {
  const { lang } = stateOf(ctx);
  return html`<fieldset>
    <legend>${ct(lang, 'scopes')}</legend>
    ${partnerScopes.map(
      (s) =>
        html`<label
          ><input
            type="checkbox"
            name="scopes"
            value="${s}"
            id="${idPrefix}-${s}"
            ${checked.includes(s) ? html`checked` : ''}
          />
          <span class="mono">${s}</span></label
        >`,
    )}
  </fieldset>`;
}

/** Settings › Integrations: the seller's Partner keys; `shown` is a key just created (shown this once). */
export async function integrationsPage(
  deps: ConsoleDeps,
  ctx: Context,
  opts: { status?: number; shown?: string | null; ok?: string | null; error?: string | null } = {},
) {
  const { lang, csrf } = stateOf(ctx);
  const keys = await deps
    .db('partner_keys')
    .where({ seller_id: sellerOf(ctx) })
    .orderBy('created_at', 'desc')
    .select('id', 'env', 'scopes', 'created_at', 'revoked_at', 'last_used_at');
  render(
    ctx,
    opts.status ?? 200,
    ct(lang, 'integrations_title'),
    html`${notice('ok', opts.ok)} ${notice('error', opts.error)}
      ${
        opts.shown &&
        html`<section aria-labelledby="new-key">
          <h2 id="new-key">${ct(lang, 'new_key_title')}</h2>
          <p>${ct(lang, 'new_key_help')}</p>
          <p class="secret" id="new-key-value">${opts.shown}</p>
        </section>`
      }
      <h2>${ct(lang, 'keys_title')}</h2>
      <p>${ct(lang, 'keys_help')}</p>
      ${
        keys.length === 0
          ? html`<p>${ct(lang, 'no_keys')}</p>`
          : html`<div ${scrollRegion(ct(lang, 'keys_title'))}>
              <table>
                <thead>
                  <tr>
                    <th>${ct(lang, 'key_id')}</th>
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
                        <td class="mono">${k.id}</td>
                        <td>${k.env}</td>
                        <td class="mono">${iso(k.created_at)}</td>
                        ${lastUsedCell(lang, k.last_used_at)}
                        <td>${k.revoked_at ? ct(lang, 'revoked') : ct(lang, 'active')}</td>
                        <td>
                          ${
                            k.revoked_at
                              ? html`<span class="mono">${(k.scopes as string[]).join(', ')}</span>`
                              : html`<form method="post" action="${INTEGRATIONS}/keys/${k.id}/scopes" class="stack">
                                    ${csrfField(csrf)} ${scopeBoxes(ctx, k.scopes, `scope-${k.id}`)}
                                    <button type="submit" class="secondary">${ct(lang, 'save_scopes')}</button>
                                  </form>
                                  <form method="post" action="${INTEGRATIONS}/keys/${k.id}/revoke">
                                    ${csrfField(csrf)}
                                    <button type="submit" class="danger">${ct(lang, 'revoke')} ${k.id}</button>
                                  </form>`
                          }
                        </td>
                      </tr>`,
                  )}
                </tbody>
              </table>
            </div>`
      }
      <h2>${ct(lang, 'create_key')}</h2>
      <form method="post" action="${INTEGRATIONS}/keys" class="stack">
        ${csrfField(csrf)} ${scopeBoxes(ctx, [], 'new')}
        <button type="submit">${ct(lang, 'create_key')}</button>
      </form>`,
    INTEGRATIONS,
  );
}

export async function createKey(deps: ConsoleDeps, ctx: Context) {
  const { lang, session } = stateOf(ctx);
  const scopes = scopesOf(ctx);
  if (scopes.length === 0) return integrationsPage(deps, ctx, { status: 422, error: ct(lang, 'choose_scope') });
  const env = deps.partnerEnvironment === 'live' ? 'live' : 'test';
  const key = await createPartnerKey(deps.db, { sellerId: sellerOf(ctx), env, scopes });
  await audit(deps.db, ctx, {
    user: session!.user,
    action: 'partner_key_create',
    target: key.key_id,
    outcome: 'success',
    detail: { scopes, env },
    at: deps.clock(),
  });
  await integrationsPage(deps, ctx, { status: 201, shown: key.key, ok: ct(lang, 'key_created', { key: key.key_id }) });
}

export async function rescopeKey(deps: ConsoleDeps, ctx: Context) {
  const { lang, session } = stateOf(ctx);
  const keyId = String(ctx.params.keyId);
  const scopes = scopesOf(ctx);
  if (scopes.length === 0) return integrationsPage(deps, ctx, { status: 422, error: ct(lang, 'choose_scope') });
  try {
    await setPartnerKeyScopes(deps.db, keyId, scopes, { sellerId: sellerOf(ctx) });
  } catch (err) {
    if (err instanceof OpsError && err.code === 'key_not_found')
      return refused(deps, ctx, 'partner_key_rescope', keyId);
    throw err;
  }
  await audit(deps.db, ctx, {
    user: session!.user,
    action: 'partner_key_rescope',
    target: keyId,
    outcome: 'success',
    detail: { scopes },
    at: deps.clock(),
  });
  await integrationsPage(deps, ctx, { ok: ct(lang, 'key_rescoped', { key: keyId }) });
}

export async function revokeKey(deps: ConsoleDeps, ctx: Context) {
  const { lang, session } = stateOf(ctx);
  const keyId = String(ctx.params.keyId);
  try {
    await revokePartnerKey(deps.db, keyId, { sellerId: sellerOf(ctx) });
  } catch (err) {
    if (err instanceof OpsError && err.code === 'key_not_found') return refused(deps, ctx, 'partner_key_revoke', keyId);
    throw err;
  }
  await audit(deps.db, ctx, {
    user: session!.user,
    action: 'partner_key_revoke',
    target: keyId,
    outcome: 'success',
    at: deps.clock(),
  });
  await integrationsPage(deps, ctx, { ok: ct(lang, 'key_revoked', { key: keyId }) });
}

/**
 * Another tenant's object (or none): 403, the same either way so nothing tells whether it exists.
 */
export async function refused(deps: ConsoleDeps, ctx: Context, action: string, target: string) {
  await audit(deps.db, ctx, { user: stateOf(ctx).session!.user, action, target, outcome: 'denied', at: deps.clock() });
  forbidden(ctx);
}

/** An order status's label key. */
export const orderStatusLabel = (status: string): ConsoleMessageKey => `st_${status}` as ConsoleMessageKey;
export const money = (amount: number, currency: string) => `${amount.toLocaleString('en-US')} ${currency}`;

export async function orderPage(
  deps: ConsoleDeps,
  ctx: Context,
  opts: { status?: number; ok?: string | null; error?: string | null } = {},
) {
  const { lang, csrf, session } = stateOf(ctx);
  const order = await getOrder(deps.db, sellerOf(ctx), String(ctx.params.orderId));
  if (!order) return notFound(ctx);
  const canMove = allowed(session!.user.role, 'orders.transition');
  const base = `/console/orders/${order.order_id}`;
  const a = order.shipping_address;
  render(
    ctx,
    opts.status ?? 200,
    ct(lang, 'order_title', { number: order.increment_id }),
    html`${notice('ok', opts.ok)} ${notice('error', opts.error)}
      <p>
        ${ct(lang, 'status')}:
        <strong id="order-status">${ct(lang, orderStatusLabel(order.status))}</strong>
        ${order.tracking_number && html` · ${order.carrier} <span class="mono">${order.tracking_number}</span>`}
      </p>
      <h2>${ct(lang, 'items')}</h2>
      <div ${scrollRegion(ct(lang, 'items'))}>
        <table>
          <thead>
            <tr>
              <th>SKU</th>
              <th>${ct(lang, 'items')}</th>
              <th>${ct(lang, 'quantity')}</th>
              <th>${ct(lang, 'unit_price')}</th>
            </tr>
          </thead>
          <tbody>
            ${order.items.map(
              (i) =>
                html`<tr>
                  <td class="mono">${i.external_sku}</td>
                  <td>${i.title}</td>
                  <td>${i.quantity}</td>
                  <td class="mono">${money(i.unit_price, order.currency)}</td>
                </tr>`,
            )}
          </tbody>
        </table>
      </div>
      <p>${ct(lang, 'total')}: <span class="mono">${money(order.total, order.currency)}</span></p>
      <h2>${ct(lang, 'ship_to')}</h2>
      <p>${a.first_name} ${a.last_name}<br />${a.address_1}<br />${a.city}<br /><span class="mono">${a.phone}</span></p>
      ${
        canMove &&
        html`<div class="actions">
          ${
            order.status === 'pending' &&
            html`<form method="post" action="${base}/accept">
              ${csrfField(csrf)}<button type="submit">${ct(lang, 'accept')}</button>
            </form>`
          }
          ${
            (order.status === 'pending' || order.status === 'accepted') &&
            html`<form method="post" action="${base}/ship" class="stack">
                ${csrfField(csrf)}
                <label>${ct(lang, 'carrier')} <input type="text" name="carrier" required maxlength="100" /></label>
                <label
                  >${ct(lang, 'tracking')} <input type="text" name="tracking_number" required maxlength="100"
                /></label>
                <button type="submit">${ct(lang, 'ship')}</button>
              </form>
              <form method="post" action="${base}/cancel" class="stack">
                ${csrfField(csrf)}
                <label>${ct(lang, 'reason')} <input type="text" name="reason" required maxlength="500" /></label>
                <button type="submit" class="danger">${ct(lang, 'cancel_order')}</button>
              </form>`
          }
        </div>`
      }
      <p><a href="/console/orders?status=${order.status}">${ct(lang, 'back_to_orders')}</a></p>`,
    '/console/orders',
  );
}

/**
 * Accept, ship or cancel one order (`moveOrderOf`: the operator CLI's service, limited to the
 * seller's own orders and the console's moves); ship with carrier and tracking number, cancel with
 * a reason (kept in the audit log).
 */
export function moveOrder(move: Move) {
  return async (deps: ConsoleDeps, ctx: Context) => {
    const { lang, session } = stateOf(ctx);
    const orderId = String(ctx.params.orderId);
    const action = `order_${move}`;
    const carrier = field(ctx, 'carrier').slice(0, 100);
    const tracking = field(ctx, 'tracking_number').slice(0, 100);
    const reason = field(ctx, 'reason').slice(0, 500);
    const missing =
      move === 'ship'
        ? !carrier
          ? 'carrier'
          : !tracking
            ? 'tracking'
            : null
        : move === 'cancel' && !reason
          ? 'reason'
          : null;
    if (missing) {
      if (!(await getOrder(deps.db, sellerOf(ctx), orderId))) return refused(deps, ctx, action, orderId);
      return orderPage(deps, ctx, { status: 422, error: ct(lang, 'field_required', { field: ct(lang, missing) }) });
    }
    const moved = await moveOrderOf(
      deps.db,
      sellerOf(ctx),
      orderId,
      move,
      move === 'ship' ? { carrier, tracking } : null,
    );
    if (moved.outcome === 'not_found') return refused(deps, ctx, action, orderId);
    if (moved.outcome === 'invalid_transition') {
      return orderPage(deps, ctx, {
        status: 409,
        error: ct(lang, 'invalid_transition', { status: ct(lang, orderStatusLabel(moved.status)) }),
      });
    }
    await audit(deps.db, ctx, {
      user: session!.user,
      action,
      target: orderId,
      outcome: 'success',
      detail: move === 'ship' ? { carrier, tracking_number: tracking } : move === 'cancel' ? { reason } : undefined,
      at: deps.clock(),
    });
    await orderPage(deps, ctx, { ok: ct(lang, MOVES[move].done) });
  };
}

import type { Context } from 'koa';
import { html } from '../hosted/html';
import { partnerScopes, PartnerScope } from '../keys/scopes';
import { iso } from '../lib/time';
import { OpsError } from '../ops/errors';
import { orderStatuses, setOrderStatus } from '../ops/order-status';
import { createPartnerKey, revokePartnerKey, setPartnerKeyScopes } from '../ops/partner-keys';
import { getOrder, listOrders } from '../partner/orders';
import { audit } from './audit';
import { ConsoleDeps, forbidden, notFound, render, stateOf } from './context';
import { csrfField, notice, scrollRegion } from './layout';
import { ConsoleMessageKey, ct } from './messages';

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
    .select('id', 'env', 'scopes', 'created_at', 'revoked_at');
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
async function refused(deps: ConsoleDeps, ctx: Context, action: string, target: string) {
  await audit(deps.db, ctx, { user: stateOf(ctx).session!.user, action, target, outcome: 'denied', at: deps.clock() });
  forbidden(ctx);
}

const statusLabel = (status: string): ConsoleMessageKey => `st_${status}` as ConsoleMessageKey;
const money = (amount: number, currency: string) => `${amount.toLocaleString('en-US')} ${currency}`;

/** Orders: one queue per status (pending first). */
export async function ordersPage(deps: ConsoleDeps, ctx: Context) {
  const { lang } = stateOf(ctx);
  const asked = typeof ctx.query.status === 'string' ? ctx.query.status : 'pending';
  const status = (orderStatuses as readonly string[]).includes(asked) ? asked : 'pending';
  const page = await listOrders(deps.db, sellerOf(ctx), { limit: 100, status });
  render(
    ctx,
    200,
    ct(lang, 'orders_title'),
    html`<ul class="tabs">
        ${orderStatuses.map(
          (s) =>
            html`<li>
              <a href="/console/orders?status=${s}" ${s === status ? html`aria-current="page"` : ''}
                >${ct(lang, statusLabel(s))}</a
              >
            </li>`,
        )}
      </ul>
      ${
        page.data.length === 0
          ? html`<p>${ct(lang, 'no_orders')}</p>`
          : html`<div ${scrollRegion(ct(lang, 'orders_title'))}>
              <table>
                <thead>
                  <tr>
                    <th>${ct(lang, 'order')}</th>
                    <th>${ct(lang, 'total')}</th>
                    <th>${ct(lang, 'placed')}</th>
                    <th>${ct(lang, 'status')}</th>
                  </tr>
                </thead>
                <tbody>
                  ${page.data.map(
                    (o) =>
                      html`<tr>
                        <td><a href="/console/orders/${o.order_id}" class="mono">${o.increment_id}</a></td>
                        <td class="mono">${money(o.total, o.currency)}</td>
                        <td class="mono">${o.created_at}</td>
                        <td>${ct(lang, statusLabel(o.status))}</td>
                      </tr>`,
                  )}
                </tbody>
              </table>
            </div>`
      }`,
    '/console/orders',
  );
}

export async function orderPage(
  deps: ConsoleDeps,
  ctx: Context,
  opts: { status?: number; ok?: string | null; error?: string | null } = {},
) {
  const { lang, csrf, session } = stateOf(ctx);
  const order = await getOrder(deps.db, sellerOf(ctx), String(ctx.params.orderId));
  if (!order) return notFound(ctx);
  const canMove = ['owner', 'operator'].includes(session!.user.role);
  const base = `/console/orders/${order.order_id}`;
  const a = order.shipping_address;
  render(
    ctx,
    opts.status ?? 200,
    ct(lang, 'order_title', { number: order.increment_id }),
    html`${notice('ok', opts.ok)} ${notice('error', opts.error)}
      <p>
        ${ct(lang, 'status')}:
        <strong id="order-status">${ct(lang, statusLabel(order.status))}</strong>
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

const MOVES = {
  accept: { to: 'accepted', done: 'order_accepted' },
  ship: { to: 'shipped', done: 'order_shipped' },
  cancel: { to: 'cancelled', done: 'order_cancelled' },
} as const;

/**
 * Accept, ship or cancel through the service the operator CLI uses (src/ops/order-status.ts),
 * limited to the seller's own orders and to the moves the decisions allow: accept from pending;
 * ship from pending or accepted (with carrier and tracking number); cancel from pending or
 * accepted (with a reason, kept in the audit log).
 */
export function moveOrder(move: keyof typeof MOVES) {
  return async (deps: ConsoleDeps, ctx: Context) => {
    const { lang, session } = stateOf(ctx);
    const orderId = String(ctx.params.orderId);
    const action = `order_${move}`;
    const current = await getOrder(deps.db, sellerOf(ctx), orderId);
    if (!current) return refused(deps, ctx, action, orderId);
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
    if (missing)
      return orderPage(deps, ctx, { status: 422, error: ct(lang, 'field_required', { field: ct(lang, missing) }) });
    // Accepting twice, or shipping a shipped order again, is not a console move.
    const from: readonly string[] = move === 'accept' ? ['pending'] : ['pending', 'accepted'];
    const invalid = () =>
      orderPage(deps, ctx, {
        status: 409,
        error: ct(lang, 'invalid_transition', { status: ct(lang, statusLabel(current.status)) }),
      });
    if (!from.includes(current.status)) return invalid();
    try {
      await setOrderStatus(deps.db, {
        orderId,
        sellerId: sellerOf(ctx),
        status: MOVES[move].to,
        ...(move === 'ship' && { carrier, tracking }),
      });
    } catch (err) {
      if (err instanceof OpsError && err.code === 'invalid_transition') return invalid();
      throw err;
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

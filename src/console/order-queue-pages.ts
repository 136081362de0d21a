/** Orders: the queues by status, and the bulk actions on the ticked orders of a queue. */
import type { Context } from 'koa';
import { Html, html } from '../hosted/html';
import { isStorableText } from '../lib/text';
import { orderStatuses } from '../ops/order-status';
import { listOrders } from '../partner/orders';
import { audit } from './audit';
import { ConsoleDeps, render, stateOf } from './context';
import { csrfField, notice, scrollRegion } from './layout';
import { ct } from './messages';
import { Move, MOVES, moveOrderOf } from './order-moves';
import { allowed } from './roles';
import { money, orderStatusLabel, refused } from './seller-pages';

export const ORDERS = '/console/orders';
/** Orders a queue page shows, and the most one bulk post may move. */
export const BULK_ORDERS_MAX = 100;

const sellerOf = (ctx: Context) => stateOf(ctx).session!.user.seller_id!;
/** A form field, trimmed; text Postgres cannot hold (U+0000) counts as not filled in. */
const field = (ctx: Context, name: string) => {
  const value = (stateOf(ctx).form.get(name) ?? '').trim();
  return isStorableText(value) ? value : '';
};
/** The form field of an order's tracking number in a bulk shipment. */
const trackingField = (orderId: string) => `tracking.${orderId}`;

/** Which moves a queue offers in bulk (the statuses they start from). */
const movesFrom = (status: string): Move[] =>
  (Object.keys(MOVES) as Move[]).filter((m) => (MOVES[m].from as readonly string[]).includes(status));

/** One order's outcome in a bulk post: done, or refused with why. */
interface BulkOutcome {
  orderId: string;
  number: string;
  done: boolean;
  /** Why it was refused: the order's status, no tracking number, or gone meanwhile. */
  why?: { status: string } | 'tracking_missing' | 'gone';
}

function outcomesSection(ctx: Context, move: Move, outcomes: BulkOutcome[]): Html {
  const { lang } = stateOf(ctx);
  const done = outcomes.filter((o) => o.done).length;
  return html`<section aria-labelledby="bulk-results" id="bulk-results-section">
    <h2 id="bulk-results">
      ${ct(lang, 'bulk_results', { action: ct(lang, move === 'cancel' ? 'cancel_order' : move) })}
    </h2>
    ${notice(done > 0 ? 'ok' : 'error', ct(lang, 'bulk_summary', { done, count: outcomes.length }))}
    <div ${scrollRegion(ct(lang, 'bulk_results', { action: ct(lang, move === 'cancel' ? 'cancel_order' : move) }))}>
      <table>
        <thead>
          <tr>
            <th>${ct(lang, 'order')}</th>
            <th>${ct(lang, 'outcome')}</th>
          </tr>
        </thead>
        <tbody>
          ${outcomes.map(
            (o) =>
              html`<tr id="bulk-${o.orderId}" data-outcome="${o.done ? 'done' : 'refused'}">
                <td><a href="${ORDERS}/${o.orderId}" class="mono">${o.number}</a></td>
                <td>
                  ${
                    o.done
                      ? ct(lang, 'bulk_done')
                      : typeof o.why === 'object'
                        ? ct(lang, 'bulk_refused_status', { status: ct(lang, orderStatusLabel(o.why.status)) })
                        : ct(lang, o.why === 'tracking_missing' ? 'bulk_refused_tracking' : 'bulk_refused_gone')
                  }
                </td>
              </tr>`,
          )}
        </tbody>
      </table>
    </div>
  </section>`;
}

/**
 * Orders: one queue per status (pending first), 100 at most. To owners and operators, the pending
 * and accepted queues are one form: tick orders, then accept, ship (one carrier, a tracking number
 * per order) or cancel (one reason) them together.
 */
export async function ordersPage(
  deps: ConsoleDeps,
  ctx: Context,
  opts: { status?: number; queue?: string; error?: string | null; results?: Html | null } = {},
) {
  const { lang, csrf, session } = stateOf(ctx);
  const asked = opts.queue ?? (typeof ctx.query.status === 'string' ? ctx.query.status : 'pending');
  const status = (orderStatuses as readonly string[]).includes(asked) ? asked : 'pending';
  const page = await listOrders(deps.db, sellerOf(ctx), { limit: BULK_ORDERS_MAX, status });
  const moves = allowed(session!.user.role, 'orders.transition') ? movesFrom(status) : [];
  const bulk = moves.length > 0 && page.data.length > 0;
  const table = html`<div ${scrollRegion(ct(lang, 'orders_title'))}>
    <table>
      <thead>
        <tr>
          ${bulk && html`<th><span class="visually-hidden">${ct(lang, 'bulk_select')}</span></th>`}
          <th>${ct(lang, 'order')}</th>
          <th>${ct(lang, 'total')}</th>
          <th>${ct(lang, 'placed')}</th>
          <th>${ct(lang, 'status')}</th>
          ${bulk && moves.includes('ship') && html`<th>${ct(lang, 'tracking')}</th>`}
        </tr>
      </thead>
      <tbody>
        ${page.data.map(
          (o) =>
            html`<tr>
              ${
                bulk &&
                html`<td>
                  <input
                    type="checkbox"
                    name="order_id"
                    value="${o.order_id}"
                    id="pick-${o.order_id}"
                    aria-label="${ct(lang, 'bulk_pick', { number: o.increment_id })}"
                  />
                </td>`
              }
              <td><a href="${ORDERS}/${o.order_id}" class="mono">${o.increment_id}</a></td>
              <td class="mono">${money(o.total, o.currency)}</td>
              <td class="mono">${o.created_at}</td>
              <td>${ct(lang, orderStatusLabel(o.status))}</td>
              ${
                bulk &&
                moves.includes('ship') &&
                html`<td>
                  <input
                    type="text"
                    name="${trackingField(o.order_id)}"
                    maxlength="100"
                    aria-label="${ct(lang, 'bulk_tracking_for', { number: o.increment_id })}"
                  />
                </td>`
              }
            </tr>`,
        )}
      </tbody>
    </table>
  </div>`;
  render(
    ctx,
    opts.status ?? 200,
    ct(lang, 'orders_title'),
    html`${notice('error', opts.error)} ${opts.results}
      <ul class="tabs">
        ${orderStatuses.map(
          (s) =>
            html`<li>
              <a href="${ORDERS}?status=${s}" ${s === status ? html`aria-current="page"` : ''}
                >${ct(lang, orderStatusLabel(s))}</a
              >
            </li>`,
        )}
      </ul>
      ${
        page.data.length === 0
          ? html`<p>${ct(lang, 'no_orders')}</p>`
          : bulk
            ? // One form, a button per action (formaction); shipping first, so Enter in a tracking field ships.
              html`<form method="post" action="${ORDERS}/bulk/ship" class="bulk">
                ${csrfField(csrf)}
                <input type="hidden" name="queue" value="${status}" />
                <p>${ct(lang, 'bulk_help', { max: BULK_ORDERS_MAX })}</p>
                ${table}
                <fieldset class="bulk-actions">
                  <legend>${ct(lang, 'bulk_legend')}</legend>
                  <div class="bulk-action">
                    <label>${ct(lang, 'carrier')} <input type="text" name="carrier" maxlength="100" /></label>
                    <button type="submit" formaction="${ORDERS}/bulk/ship">${ct(lang, 'bulk_ship')}</button>
                  </div>
                  ${
                    moves.includes('accept') &&
                    html`<div class="bulk-action">
                      <button type="submit" formaction="${ORDERS}/bulk/accept">${ct(lang, 'bulk_accept')}</button>
                    </div>`
                  }
                  <div class="bulk-action">
                    <label>${ct(lang, 'reason')} <input type="text" name="reason" maxlength="500" /></label>
                    <button type="submit" formaction="${ORDERS}/bulk/cancel" class="danger">
                      ${ct(lang, 'bulk_cancel')}
                    </button>
                  </div>
                </fieldset>
              </form>`
            : table
      }`,
    ORDERS,
  );
}

/**
 * A bulk action (`move`): the ticked orders (1 to 100, all the seller's: one that is not refuses the
 * whole post, 403) accepted, shipped or cancelled one by one through the single action's service
 * (`moveOrderOf`), each done or refused on its own (its status, or no tracking number), never all
 * or nothing. Audited per order (as the single actions, with `bulk`) and once for the post.
 * 200 when any order moved, 409 when none did; a post that cannot start (no order, too many, no
 * carrier or reason) is 422 with nothing done.
 */
export const bulkOrders = (move: Move) => async (deps: ConsoleDeps, ctx: Context) => {
  const { lang, session, form } = stateOf(ctx);
  const user = session!.user;
  const queue = field(ctx, 'queue');
  const invalid = (error: string) => ordersPage(deps, ctx, { status: 422, queue, error });
  const ids = [...new Set(form.getAll('order_id').map((id) => id.trim()))].filter((id) => id !== '');
  if (ids.length === 0) return invalid(ct(lang, 'bulk_none'));
  if (ids.length > BULK_ORDERS_MAX)
    return invalid(ct(lang, 'bulk_too_many', { max: BULK_ORDERS_MAX, count: ids.length }));
  const carrier = field(ctx, 'carrier').slice(0, 100);
  const reason = field(ctx, 'reason').slice(0, 500);
  if (move === 'ship' && !carrier) return invalid(ct(lang, 'field_required', { field: ct(lang, 'carrier') }));
  if (move === 'cancel' && !reason) return invalid(ct(lang, 'field_required', { field: ct(lang, 'reason') }));

  const action = `order_bulk_${move}`;
  const numbers = new Map<string, string>(
    (
      await deps
        .db('orders')
        .where({ seller_id: sellerOf(ctx) })
        .whereIn('id', ids.filter(isStorableText))
        .select('id', 'increment_id')
    ).map((o: { id: string; increment_id: string }) => [o.id, o.increment_id]),
  );
  // A ticked order that is not the seller's comes from an altered form: nothing is done.
  const foreign = ids.find((id) => !numbers.has(id));
  if (foreign !== undefined) return refused(deps, ctx, action, foreign);

  const outcomes: BulkOutcome[] = [];
  for (const orderId of ids) {
    const tracking = field(ctx, trackingField(orderId)).slice(0, 100);
    const base = { orderId, number: numbers.get(orderId)! };
    if (move === 'ship' && !tracking) {
      outcomes.push({ ...base, done: false, why: 'tracking_missing' });
    } else {
      const moved = await moveOrderOf(
        deps.db,
        sellerOf(ctx),
        orderId,
        move,
        move === 'ship' ? { carrier, tracking } : null,
      );
      outcomes.push(
        moved.outcome === 'done'
          ? { ...base, done: true }
          : moved.outcome === 'invalid_transition'
            ? { ...base, done: false, why: { status: moved.status } }
            : { ...base, done: false, why: 'gone' },
      );
    }
    const { done, why } = outcomes.at(-1)!;
    await audit(deps.db, ctx, {
      user,
      action: `order_${move}`,
      target: orderId,
      outcome: done ? 'success' : 'failed',
      detail: {
        bulk: true,
        ...(move === 'ship' && { carrier, ...(tracking && { tracking_number: tracking }) }),
        ...(move === 'cancel' && { reason }),
        ...(typeof why === 'object' && { error: 'invalid_transition', status: why.status }),
        ...(typeof why === 'string' && { error: why }),
      },
      at: deps.clock(),
    });
  }
  const done = outcomes.filter((o) => o.done).length;
  await audit(deps.db, ctx, {
    user,
    action,
    outcome: done > 0 ? 'success' : 'failed',
    detail: {
      orders: ids.length,
      done,
      refused: ids.length - done,
      ...(move === 'ship' && { carrier }),
      ...(move === 'cancel' && { reason }),
    },
    at: deps.clock(),
  });
  await ordersPage(deps, ctx, { status: done > 0 ? 200 : 409, queue, results: outcomesSection(ctx, move, outcomes) });
};

/**
 * Inventory and prices by SKU: the seller's SKUs with stock and list price, set with a guard
 * against overwriting a value changed since the page was read (through `PATCH /inventory/bulk`'s
 * service), and stock adjustments with their history (through `POST /inventory/adjustments`'s).
 */
import type { Context } from 'koa';
import { Html, html } from '../hosted/html';
import { decodeCursor, encodeCursor } from '../http/cursor';
import { ApiError } from '../http/errors';
import { adjustmentCategories, type AdjustmentCategory, type AdjustmentIn } from '../partner/schemas';
import { applyAdjustments } from '../partner/adjustments';
import {
  AdjustmentsKey,
  findInventoryItem,
  InventoryItem,
  listAdjustments,
  listInventory,
} from '../partner/inventory-read';
import { InventoryField, setInventoryIfUnchanged } from '../partner/inventory-set';
import { readAdjustment } from '../partner/params';
import { parseRfc3339 } from '../partner/since';
import { audit } from './audit';
import { ConsoleDeps, notFound, render, stateOf } from './context';
import { csrfField, notice, scrollRegion } from './layout';
import { ConsoleMessageKey, ct } from './messages';
import { allowed } from './roles';
import { refused } from './seller-pages';

export const INVENTORY = '/console/inventory';
/** SKUs per inventory page, and adjustments per page of a SKU's history. */
export const INVENTORY_PER_PAGE = 50;
export const ADJUSTMENTS_PER_PAGE = 50;

const itemPath = (variantId: string) => `${INVENTORY}/${encodeURIComponent(variantId)}`;
const sellerOf = (ctx: Context) => stateOf(ctx).session!.user.seller_id!;
const queryOf = (ctx: Context, name: string) => (typeof ctx.query[name] === 'string' ? ctx.query[name].trim() : '');
const formOf = (ctx: Context, name: string) => (stateOf(ctx).form.get(name) ?? '').trim();
const iqd = (amount: number) => `${amount.toLocaleString('en-US')} IQD`;
const categoryLabel = (c: string): ConsoleMessageKey => `adj_${c}` as ConsoleMessageKey;
const badCursor = () => new ApiError(400, 'validation_error', 'cursor');

/** The value a form shows and carries back as `expected`: the level as stored (no stock row reads as 0). */
const onHandOf = (item: InventoryItem) => item.on_hand ?? '0';

/** The set form of one value, with what the page read (`expected`) for the guard. */
function setForm(ctx: Context, item: InventoryItem, which: 'stock' | 'price', opts: { labelled: boolean }): Html {
  const { lang, csrf } = stateOf(ctx);
  const read = which === 'stock' ? onHandOf(item) : String(item.price);
  const name = which === 'stock' ? 'on_hand' : 'price_iqd';
  const label = ct(lang, which === 'stock' ? 'inventory_new_stock' : 'inventory_new_price', { sku: item.sku });
  const input = html`<input
    type="number"
    name="${name}"
    min="0"
    step="1"
    inputmode="numeric"
    required
    value="${read}"
    ${opts.labelled ? '' : html`aria-label="${label}"`}
  />`;
  return html`<form
    method="post"
    action="${itemPath(item.variant_id)}/${which}"
    class="${opts.labelled ? 'stack' : 'cell-form'}"
  >
    ${csrfField(csrf)}
    <input type="hidden" name="expected" value="${read}" />
    ${opts.labelled ? html`<label>${label} ${input}</label>` : input}
    <button type="submit" class="secondary">
      ${ct(lang, opts.labelled ? (which === 'stock' ? 'inventory_set_stock' : 'inventory_set_price') : 'inventory_save')}
    </button>
  </form>`;
}

/** The on-hand cell or block: the value, and the form for those who may write. */
function stockPart(ctx: Context, item: InventoryItem, may: boolean, labelled: boolean): Html {
  const { lang } = stateOf(ctx);
  if (!item.location_id) return html`<span>${ct(lang, 'inventory_no_location')}</span>`;
  return may ? setForm(ctx, item, 'stock', { labelled }) : html`<span class="mono">${onHandOf(item)}</span>`;
}

/** The price cell or block: single-variant products' list price is set by SKU; others' is shown. */
function pricePart(ctx: Context, item: InventoryItem, may: boolean, labelled: boolean): Html {
  const { lang } = stateOf(ctx);
  const sale =
    item.sale_price !== null
      ? html`<br /><small>${ct(lang, 'inventory_on_sale', { price: iqd(item.sale_price) })}</small>`
      : '';
  if (item.multi_variant || !may)
    return html`<span class="mono">${iqd(item.price)}</span>${sale}${
        item.multi_variant ? html`<br /><small>${ct(lang, 'inventory_multi_variant')}</small>` : ''
      }`;
  return html`${setForm(ctx, item, 'price', { labelled })}${sale}`;
}

/** Inventory: the seller's SKUs (one per SKU, the variant the APIs address), 50 a page, searched by SKU prefix. */
export async function inventoryPage(deps: ConsoleDeps, ctx: Context) {
  const { lang, session } = stateOf(ctx);
  const prefix = queryOf(ctx, 'sku').slice(0, 200);
  const cursor = queryOf(ctx, 'cursor');
  let after: string | undefined;
  try {
    const key = cursor ? decodeCursor('inventory', cursor, badCursor) : null;
    if (key && (key.length !== 1 || typeof key[0] !== 'string')) throw badCursor();
    after = key ? (key[0] as string) : undefined;
  } catch (err) {
    if (!(err instanceof ApiError)) throw err;
    return render(ctx, 422, ct(lang, 'inventory_title'), html`${notice('error', ct(lang, 'bad_cursor'))}`, INVENTORY);
  }
  const page = await listInventory(deps.db, sellerOf(ctx), {
    prefix: prefix || undefined,
    after,
    limit: INVENTORY_PER_PAGE,
  });
  const may = allowed(session!.user.role, 'inventory.write');
  const last = page.items.at(-1);
  const next =
    page.hasMore && last
      ? new URLSearchParams({ ...(prefix && { sku: prefix }), cursor: encodeCursor('inventory', [last.sku]) })
      : null;
  render(
    ctx,
    200,
    ct(lang, 'inventory_title'),
    html`<p>${ct(lang, may ? 'inventory_help' : 'inventory_help_read')}</p>
      <form method="get" action="${INVENTORY}" class="stack" role="search">
        <label
          >${ct(lang, 'inventory_search')} <input type="text" name="sku" value="${prefix}" maxlength="200"
        /></label>
        <button type="submit" class="secondary">${ct(lang, 'search')}</button>
      </form>
      ${
        page.items.length === 0
          ? html`<p>${ct(lang, 'inventory_none')}</p>`
          : html`<div ${scrollRegion(ct(lang, 'inventory_title'))}>
              <table class="inventory">
                <thead>
                  <tr>
                    <th>SKU</th>
                    <th>${ct(lang, 'product')}</th>
                    <th>${ct(lang, 'inventory_on_hand')}</th>
                    <th>${ct(lang, 'inventory_stocked')}</th>
                    <th>${ct(lang, 'inventory_price')}</th>
                  </tr>
                </thead>
                <tbody>
                  ${page.items.map(
                    (item) =>
                      html`<tr id="sku-${item.variant_id}">
                        <td><a href="${itemPath(item.variant_id)}" class="mono">${item.sku}</a></td>
                        <td>${item.title}</td>
                        <td>${stockPart(ctx, item, may, false)}</td>
                        <td class="mono">${item.stocked_quantity}</td>
                        <td>${pricePart(ctx, item, may, false)}</td>
                      </tr>`,
                  )}
                </tbody>
              </table>
            </div>`
      }
      ${next && html`<p><a href="${INVENTORY}?${next.toString()}" rel="next">${ct(lang, 'inventory_next')}</a></p>`}`,
    INVENTORY,
  );
}

/** The `cursor` of a SKU's history page: the last row's created_at and id. */
function historyKey(raw: string): AdjustmentsKey | null {
  const key = decodeCursor('adjustments', raw, badCursor);
  const [at, id, ...rest] = key;
  const when = typeof at === 'string' ? parseRfc3339(at) : null;
  if (rest.length > 0 || when === null || typeof id !== 'string' || id === '') throw badCursor();
  return { at: when, id };
}

type PageOpts = { status?: number; ok?: string | null; error?: string | null };

/** A SKU: its values and their forms, the adjustment form, and its adjustments, newest first, 50 a page. */
export async function inventoryItemPage(deps: ConsoleDeps, ctx: Context, opts: PageOpts = {}) {
  const { lang, csrf, session } = stateOf(ctx);
  const item = await findInventoryItem(deps.db, sellerOf(ctx), String(ctx.params.variantId));
  if (!item) return notFound(ctx);
  const cursor = ctx.method === 'GET' ? queryOf(ctx, 'cursor') : '';
  let after: AdjustmentsKey | null;
  try {
    after = cursor ? historyKey(cursor) : null;
  } catch (err) {
    if (!(err instanceof ApiError)) throw err;
    return render(
      ctx,
      422,
      ct(lang, 'inventory_item_title', { sku: item.sku }),
      html`${notice('error', ct(lang, 'bad_cursor'))}`,
      INVENTORY,
    );
  }
  const history = await listAdjustments(deps.db, sellerOf(ctx), item.variant_id, {
    after: after ?? undefined,
    limit: ADJUSTMENTS_PER_PAGE,
  });
  const may = allowed(session!.user.role, 'inventory.write');
  const base = itemPath(item.variant_id);
  const older =
    history.hasMore && history.lastKey
      ? encodeCursor('adjustments', [history.lastKey.at.toISOString(), history.lastKey.id])
      : null;
  render(
    ctx,
    opts.status ?? 200,
    ct(lang, 'inventory_item_title', { sku: item.sku }),
    html`${notice('ok', opts.ok)} ${notice('error', opts.error)}
      <p>
        ${item.title}${
          Object.keys(item.options).length > 0 &&
          html` ·
          ${Object.entries(item.options)
            .map(([k, v]) => `${k}: ${v}`)
            .join(', ')}`
        }
      </p>
      <dl class="facts">
        <dt>${ct(lang, 'inventory_on_hand')}</dt>
        <dd class="mono" id="on-hand">${item.location_id ? onHandOf(item) : ct(lang, 'inventory_no_location')}</dd>
        <dt>${ct(lang, 'inventory_stocked')}</dt>
        <dd class="mono" id="stocked">${item.stocked_quantity}</dd>
        <dt>${ct(lang, 'inventory_price')}</dt>
        <dd id="price">${pricePart(ctx, item, false, true)}</dd>
      </dl>
      ${
        may &&
        html`<div class="actions">
            ${item.location_id && stockPart(ctx, item, may, true)}
            ${!item.multi_variant && pricePart(ctx, item, may, true)}
          </div>
          <h2 id="adjust">${ct(lang, 'adjust_title')}</h2>
          <p>${ct(lang, 'adjust_help')}</p>
          <div class="actions">
            <form method="post" action="${base}/adjustments" class="stack" aria-labelledby="adjust">
              ${csrfField(csrf)}
              <label
                >${ct(lang, 'adjust_category')}
                <select name="category" required>
                  ${adjustmentCategories.map((c) => html`<option value="${c}">${ct(lang, categoryLabel(c))}</option>`)}
                </select></label
              >
              <label
                >${ct(lang, 'adjust_delta')}
                <input type="text" name="delta" required inputmode="numeric" pattern="-?[0-9]+" maxlength="11"
              /></label>
              <label>${ct(lang, 'reason')} <input type="text" name="reason" required maxlength="500" /></label>
              <label
                >${ct(lang, 'adjust_unit_value')}
                <input type="text" name="unit_value" inputmode="numeric" pattern="[0-9]*" maxlength="16"
              /></label>
              <button type="submit">${ct(lang, 'adjust_submit')}</button>
            </form>
          </div>`
      }
      <h2 id="history">${ct(lang, 'adjust_history')}</h2>
      ${
        history.rows.length === 0
          ? html`<p>${ct(lang, 'adjust_none')}</p>`
          : html`<div ${scrollRegion(ct(lang, 'adjust_history'))}>
              <table>
                <thead>
                  <tr>
                    <th>${ct(lang, 'when')}</th>
                    <th>${ct(lang, 'adjust_category')}</th>
                    <th>${ct(lang, 'adjust_change')}</th>
                    <th>${ct(lang, 'adjust_level_after')}</th>
                    <th>${ct(lang, 'reason')}</th>
                    <th>${ct(lang, 'adjust_by')}</th>
                  </tr>
                </thead>
                <tbody>
                  ${history.rows.map(
                    (a) =>
                      html`<tr id="adj-${a.adjustment_id}">
                        <td class="mono">${a.created_at}</td>
                        <td>
                          ${ct(lang, categoryLabel(a.category))}
                          ${a.unit_value !== null && html`<br /><small class="mono">${iqd(Number(a.unit_value))}</small>`}
                        </td>
                        <td class="mono">${a.delta > 0 ? `+${a.delta}` : String(a.delta)}</td>
                        <td class="mono">${a.level_after}</td>
                        <td>${a.reason}</td>
                        <td>
                          ${a.api_key_id ? html`<span class="mono">${a.api_key_id}</span>` : ct(lang, 'adjust_by_console')}
                        </td>
                      </tr>`,
                  )}
                </tbody>
              </table>
            </div>`
      }
      ${older && html`<p><a href="${base}?cursor=${older}#history" rel="next">${ct(lang, 'adjust_older')}</a></p>`}
      <p><a href="${INVENTORY}">${ct(lang, 'inventory_back')}</a></p>`,
    INVENTORY,
  );
}

const REFUSALS: Record<string, ConsoleMessageKey> = {
  product_has_multiple_variants: 'inventory_multi_variant',
  inventory_item_not_found: 'inventory_no_location',
};

/**
 * Sets the SKU's stock (at the primary location) or list price, only if it is still what the
 * form read (`expected`): else 409 with the value now, nothing written. Audited with from and to.
 */
export function setInventoryValue(which: 'stock' | 'price') {
  const field: InventoryField = which === 'stock' ? 'on_hand' : 'price_iqd';
  const action = `inventory_set_${which}`;
  return async (deps: ConsoleDeps, ctx: Context) => {
    const { lang, session } = stateOf(ctx);
    const variantId = String(ctx.params.variantId);
    const raw = formOf(ctx, field);
    const expected = formOf(ctx, 'expected');
    if (!/^\d{1,15}$/.test(raw)) {
      if (!(await findInventoryItem(deps.db, sellerOf(ctx), variantId))) return refused(deps, ctx, action, variantId);
      return inventoryItemPage(deps, ctx, { status: 422, error: ct(lang, 'inventory_whole_number') });
    }
    const result = await setInventoryIfUnchanged(deps.db, sellerOf(ctx), {
      variantId,
      field,
      value: Number(raw),
      expected: expected === '' ? null : expected,
    });
    if (result.outcome === 'not_found') return refused(deps, ctx, action, variantId);
    const entry = { user: session!.user, action, target: result.sku, at: deps.clock() };
    if (result.outcome === 'stale') {
      await audit(deps.db, ctx, {
        ...entry,
        outcome: 'failed',
        detail: { error: 'stale', expected, current: result.current, to: Number(raw) },
      });
      return inventoryItemPage(deps, ctx, {
        status: 409,
        error: ct(lang, 'inventory_stale', { sku: result.sku, read: expected || '0', current: result.current ?? '0' }),
      });
    }
    if (result.outcome === 'rejected') {
      await audit(deps.db, ctx, { ...entry, outcome: 'failed', detail: { error: result.code, to: Number(raw) } });
      return inventoryItemPage(deps, ctx, {
        status: 422,
        error: ct(lang, REFUSALS[result.code] ?? 'inventory_whole_number'),
      });
    }
    await audit(deps.db, ctx, {
      ...entry,
      outcome: 'success',
      detail: { variant_id: variantId, from: result.from, to: result.to },
    });
    await inventoryItemPage(deps, ctx, {
      ok: ct(lang, which === 'stock' ? 'inventory_stock_saved' : 'inventory_price_saved', {
        sku: result.sku,
        from: result.from ?? '0',
        to: result.to,
      }),
    });
  };
}

/** A whole number as text, else the text itself (the schema then calls it `invalid`); blank is absent. */
const numberOrText = (s: string) => (s === '' ? undefined : /^[+-]?\d{1,16}$/.test(s) ? Number(s) : s);

/** The form fields of the Partner schema's detail paths. */
const FIELD_LABELS: Record<string, ConsoleMessageKey> = {
  reason: 'reason',
  category: 'adjust_category',
  unit_value: 'adjust_unit_value',
  'items[0].delta': 'adjust_delta',
};

/**
 * Records an adjustment of the SKU (a signed change with a category, a reason and, for a sale
 * elsewhere, the unit value) through `POST /inventory/adjustments`' schema and service, at the
 * primary location. The service's refusals are 422 with nothing written.
 */
export async function adjustStock(deps: ConsoleDeps, ctx: Context) {
  const { lang, session } = stateOf(ctx);
  const variantId = String(ctx.params.variantId);
  const item = await findInventoryItem(deps.db, sellerOf(ctx), variantId);
  if (!item) return refused(deps, ctx, 'stock_adjust', variantId);
  let input: AdjustmentIn;
  try {
    input = readAdjustment({
      reason: formOf(ctx, 'reason').slice(0, 500),
      category: formOf(ctx, 'category'),
      unit_value: numberOrText(formOf(ctx, 'unit_value')) ?? null,
      items: [{ external_sku: item.sku, delta: numberOrText(formOf(ctx, 'delta')) }],
    });
  } catch (err) {
    if (!(err instanceof ApiError)) throw err;
    const fields = [...new Set(err.details.map((d) => ct(lang, FIELD_LABELS[d.field ?? ''] ?? 'adjust_delta')))];
    return inventoryItemPage(deps, ctx, {
      status: 422,
      error: ct(lang, 'adjust_invalid', { fields: fields.join(', ') }),
    });
  }
  let rows;
  try {
    rows = await applyAdjustments(deps.db, { sellerId: sellerOf(ctx), keyId: null }, input);
  } catch (err) {
    if (!(err instanceof ApiError)) throw err;
    if (err.status === 404) return refused(deps, ctx, 'stock_adjust', variantId);
    const negative = err.details.some((d) => d.issue === 'negative_result');
    const noLocation = err.details.some((d) => d.issue === 'missing');
    await audit(deps.db, ctx, {
      user: session!.user,
      action: 'stock_adjust',
      target: item.sku,
      outcome: 'failed',
      detail: {
        error: negative ? 'negative_result' : noLocation ? 'no_location' : err.code,
        delta: input.items[0].delta,
      },
      at: deps.clock(),
    });
    const message: ConsoleMessageKey = negative
      ? 'adjust_negative'
      : noLocation
        ? 'inventory_no_location'
        : 'adjust_too_large';
    return inventoryItemPage(deps, ctx, { status: 422, error: ct(lang, message) });
  }
  const [row] = rows;
  await audit(deps.db, ctx, {
    user: session!.user,
    action: 'stock_adjust',
    target: item.sku,
    outcome: 'success',
    detail: {
      adjustment_id: row.adjustment_id,
      category: input.category as AdjustmentCategory,
      delta: row.delta,
      reason: input.reason,
      ...(input.unit_value != null && { unit_value: input.unit_value }),
    },
    at: deps.clock(),
  });
  await inventoryItemPage(deps, ctx, {
    ok: ct(lang, 'adjust_done', {
      sku: item.sku,
      delta: row.delta > 0 ? `+${row.delta}` : String(row.delta),
      stocked: row.stocked_quantity,
    }),
  });
}

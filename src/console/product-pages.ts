import type { Context } from 'koa';
import { html } from '../hosted/html';
import { OpsError } from '../ops/errors';
import { resubmitProduct, submitProduct } from '../ops/product-review';
import type { ProductStatus } from '../ops/products';
import { findProductById, findProductBySku, listProducts } from '../partner/catalog-read';
import { audit } from './audit';
import { ConsoleDeps, forbidden, notFound, render, stateOf } from './context';
import { csrfField, notice, scrollRegion } from './layout';
import { ConsoleMessageKey, ct } from './messages';
import { allowed } from './roles';

const STATUSES: readonly ProductStatus[] = ['draft', 'proposed', 'published', 'rejected'];
const statusLabel = (status: string): ConsoleMessageKey => `pst_${status}` as ConsoleMessageKey;
const sellerOf = (ctx: Context) => stateOf(ctx).session!.user.seller_id!;
const money = (amount: number) => `${amount.toLocaleString('en-US')} IQD`;

/** Products: by status (all by default), or the one carrying a SKU. */
export async function productsPage(deps: ConsoleDeps, ctx: Context) {
  const { lang } = stateOf(ctx);
  const asked = typeof ctx.query.status === 'string' ? ctx.query.status : '';
  const status = (STATUSES as readonly string[]).includes(asked) ? asked : undefined;
  const sku = typeof ctx.query.sku === 'string' ? ctx.query.sku.trim().slice(0, 200) : '';
  const rows = sku
    ? [await findProductBySku(deps.db, sellerOf(ctx), sku)].filter((r) => r !== null)
    : (await listProducts(deps.db, sellerOf(ctx), { status, limit: 100 })).rows;
  const tab = (value: string | undefined, label: string) =>
    html`<li>
      <a
        href="/console/products${value ? `?status=${value}` : ''}"
        ${!sku && value === status ? html`aria-current="page"` : ''}
        >${label}</a
      >
    </li>`;
  render(
    ctx,
    200,
    ct(lang, 'products_title'),
    html`<ul class="tabs">
        ${tab(undefined, ct(lang, 'all'))} ${STATUSES.map((s) => tab(s, ct(lang, statusLabel(s))))}
      </ul>
      <form method="get" action="/console/products" class="stack" role="search">
        <label>${ct(lang, 'search_sku')} <input type="text" name="sku" value="${sku}" /></label>
        <button type="submit" class="secondary">${ct(lang, 'search')}</button>
      </form>
      ${
        rows.length === 0
          ? html`<p>${ct(lang, 'no_products')}</p>`
          : html`<div ${scrollRegion(ct(lang, 'products_title'))}>
              <table>
                <thead>
                  <tr>
                    <th>${ct(lang, 'product')}</th>
                    <th>SKU</th>
                    <th>${ct(lang, 'status')}</th>
                  </tr>
                </thead>
                <tbody>
                  ${rows.map(
                    ({ product: p, variants }) =>
                      html`<tr>
                        <td><a href="/console/products/${p.id}">${p.title}</a></td>
                        <td class="mono">${variants.map((v) => v.sku).join(', ')}</td>
                        <td>${ct(lang, statusLabel(p.status))}</td>
                      </tr>`,
                  )}
                </tbody>
              </table>
            </div>`
      }`,
    '/console/products',
  );
}

export async function productPage(
  deps: ConsoleDeps,
  ctx: Context,
  opts: { status?: number; ok?: string | null; error?: string | null } = {},
) {
  const { lang, csrf, session } = stateOf(ctx);
  const found = await findProductById(deps.db, sellerOf(ctx), String(ctx.params.productId));
  if (!found) return notFound(ctx);
  const { product: p, variants } = found;
  const may = allowed(session!.user.role, 'products.submit');
  const base = `/console/products/${p.id}`;
  render(
    ctx,
    opts.status ?? 200,
    p.title,
    html`${notice('ok', opts.ok)} ${notice('error', opts.error)}
      <p>${ct(lang, 'status')}: <strong id="product-status">${ct(lang, statusLabel(p.status))}</strong></p>
      ${
        p.status === 'rejected' &&
        html`<p>${ct(lang, 'rejection_reason')}: <span id="rejection-reason">${p.rejection_reason}</span></p>`
      }
      <h2>${ct(lang, 'variants')}</h2>
      <div ${scrollRegion(ct(lang, 'variants'))}>
        <table>
          <thead>
            <tr>
              <th>SKU</th>
              <th>${ct(lang, 'variants')}</th>
              <th>${ct(lang, 'price')}</th>
              <th>${ct(lang, 'stock')}</th>
            </tr>
          </thead>
          <tbody>
            ${variants.map(
              (v) =>
                html`<tr>
                  <td class="mono">${v.sku}</td>
                  <td>
                    ${Object.entries(v.options)
                      .map(([k, val]) => `${k}: ${val}`)
                      .join(', ')}
                  </td>
                  <td class="mono">${money(v.price)}</td>
                  <td>${v.stocked_quantity}</td>
                </tr>`,
            )}
          </tbody>
        </table>
      </div>
      ${
        may &&
        p.status === 'draft' &&
        html`<form method="post" action="${base}/submit">
          ${csrfField(csrf)}<button type="submit">${ct(lang, 'submit_review')}</button>
        </form>`
      }
      ${
        may &&
        p.status === 'rejected' &&
        html`<form method="post" action="${base}/resubmit">
          ${csrfField(csrf)}<button type="submit">${ct(lang, 'resubmit')}</button>
        </form>`
      }
      <p><a href="/console/products">${ct(lang, 'products_title')}</a></p>`,
    '/console/products',
  );
}

const REVIEW = {
  submit: { run: submitProduct, done: 'product_submitted' },
  resubmit: { run: resubmitProduct, done: 'product_resubmitted' },
} as const;

/**
 * Submit (draft → proposed) or resubmit (rejected → proposed) through the operator CLI's review
 * service, limited to the seller's own products: the dashboard moves the Partner contract names.
 */
export function reviewProduct(which: keyof typeof REVIEW) {
  return async (deps: ConsoleDeps, ctx: Context) => {
    const { lang, session } = stateOf(ctx);
    const productId = String(ctx.params.productId);
    const action = `product_${which}`;
    try {
      await REVIEW[which].run(deps.db, productId, { sellerId: sellerOf(ctx) });
    } catch (err) {
      if (err instanceof OpsError && err.code === 'product_not_found') {
        await audit(deps.db, ctx, {
          user: session!.user,
          action,
          target: productId,
          outcome: 'denied',
          at: deps.clock(),
        });
        return forbidden(ctx);
      }
      if (err instanceof OpsError && err.code === 'invalid_transition') {
        const current = await findProductById(deps.db, sellerOf(ctx), productId);
        const status = ct(lang, statusLabel(current?.product.status ?? 'draft'));
        return productPage(deps, ctx, { status: 409, error: ct(lang, 'product_invalid_transition', { status }) });
      }
      throw err;
    }
    await audit(deps.db, ctx, { user: session!.user, action, target: productId, outcome: 'success', at: deps.clock() });
    await productPage(deps, ctx, { ok: ct(lang, REVIEW[which].done) });
  };
}

import { countBulkRows } from '../telemetry/partner';
import Router from '@koa/router';
import type { AppDeps } from '../deps';
import { partnerChainDeps } from '../deps';
import { ApiError } from '../http/errors';
import { partnerChain } from '../http/partner-chain';
import { servedPartnerDocument } from '../openapi/routes';
import { applyAdjustments } from './adjustments';
import { bulkUpsertProducts } from './bulk-upsert';
import { findProductBySku, listProducts } from './catalog-read';
import { bulkUpdateInventory } from './inventory-bulk';
import { getOrder, listOrders } from './orders';
import {
  encodeOrdersCursor,
  encodeProductsCursor,
  readAdjustment,
  readBulkItems,
  readOrderListQuery,
  readProductListQuery,
} from './params';
import { BULK_INVENTORY_ROWS, BULK_PRODUCT_ROWS } from './schemas';
import { productOut } from './serializers';

/** The Partner API under `/partner/v1`: eight operations, keyed by the seller's SKU. */
export function partnerRouter(deps: AppDeps): Router {
  const router = new Router({ prefix: '/partner/v1' });
  const chain = partnerChainDeps(deps);
  const { db } = deps;

  router.get('/health', (ctx) => {
    ctx.body = { status: 'ok', api: 'partner', version: 'v1', currency: 'IQD' };
  });

  router.get('/openapi.json', (ctx) => {
    ctx.body = servedPartnerDocument();
  });

  router.get('/products', ...partnerChain(chain, { scope: 'catalog:read' }), async (ctx) => {
    const q = readProductListQuery(ctx.query);
    const page = await listProducts(db, ctx.state.partner.sellerId, {
      status: q.status,
      afterId: q.cursor ?? undefined,
      limit: q.limit,
    });
    const last = page.rows[page.rows.length - 1];
    ctx.body = {
      data: page.rows.map(productOut),
      next_cursor: page.hasMore ? encodeProductsCursor(last.product.id) : null,
      has_more: page.hasMore,
    };
  });

  router.get('/products/:sku', ...partnerChain(chain, { scope: 'catalog:read' }), async (ctx) => {
    const product = await findProductBySku(db, ctx.state.partner.sellerId, ctx.params.sku);
    if (!product) throw ApiError.notFound('product_not_found', `No product has SKU ${ctx.params.sku}.`);
    ctx.body = productOut(product);
  });

  router.post(
    '/products/bulk',
    ...partnerChain(chain, { scope: 'catalog:write', idempotent: 'POST /products/bulk', rateLimited: 'products-bulk' }),
    async (ctx) => {
      const items = readBulkItems(ctx.request.body, BULK_PRODUCT_ROWS);
      ctx.body = {
        results: countBulkRows('products', await bulkUpsertProducts(db, ctx.state.partner.sellerId, items)),
      };
    },
  );

  router.patch(
    '/inventory/bulk',
    ...partnerChain(chain, {
      scope: 'inventory:write',
      idempotent: 'PATCH /inventory/bulk',
      rateLimited: 'inventory-bulk',
    }),
    async (ctx) => {
      const items = readBulkItems(ctx.request.body, BULK_INVENTORY_ROWS);
      ctx.body = {
        results: countBulkRows('inventory', await bulkUpdateInventory(db, ctx.state.partner.sellerId, items)),
      };
    },
  );

  router.post(
    '/inventory/adjustments',
    ...partnerChain(chain, { scope: 'inventory:write', idempotent: 'POST /inventory/adjustments' }),
    async (ctx) => {
      const input = readAdjustment(ctx.request.body);
      const data = await applyAdjustments(db, ctx.state.partner, input);
      ctx.body = { reason: input.reason, category: input.category, data };
    },
  );

  router.get('/orders', ...partnerChain(chain, { scope: 'orders:read' }), async (ctx) => {
    const q = readOrderListQuery(ctx.query);
    const page = await listOrders(db, ctx.state.partner.sellerId, {
      since: q.since,
      after: q.cursor ?? undefined,
      limit: q.limit,
    });
    ctx.body = {
      data: page.data,
      next_cursor: page.hasMore && page.lastKey ? encodeOrdersCursor(page.lastKey) : null,
      has_more: page.hasMore,
    };
  });

  router.get('/orders/:id', ...partnerChain(chain, { scope: 'orders:read' }), async (ctx) => {
    const order = await getOrder(db, ctx.state.partner.sellerId, ctx.params.id);
    if (!order) throw ApiError.notFound('order_not_found', 'No such order.');
    ctx.body = order;
  });

  return router;
}

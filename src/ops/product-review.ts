import type { Db } from '../db/knex';
import { nonBlank } from './checks';
import { OpsError } from './errors';
import type { ProductStatus } from './products';

export interface ProductStatusOut {
  product_id: string;
  status: ProductStatus;
  rejection_reason: string | null;
}

/** Moves a product `from` → `to` with one conditional UPDATE; a product in another status is `invalid_transition`. */
async function move(
  db: Db,
  productId: string,
  from: ProductStatus,
  to: ProductStatus,
  rejectionReason: string | null,
  sellerId?: string,
): Promise<ProductStatusOut> {
  const mine = { id: productId, ...(sellerId !== undefined && { seller_id: sellerId }) };
  const [row] = await db('products')
    .where({ ...mine, status: from })
    .update({ status: to, rejection_reason: rejectionReason, updated_at: db.fn.now() })
    .returning(['id', 'status', 'rejection_reason']);
  if (row) return { product_id: row.id, status: row.status, rejection_reason: row.rejection_reason };
  const current = await db('products').where(mine).first('status');
  if (!current) throw new OpsError('product_not_found', `no product ${productId}`);
  throw new OpsError(
    'invalid_transition',
    `product ${productId} is ${current.status}; only a ${from} product can become ${to}`,
  );
}

/** The seller's dashboard submit: draft → proposed (`sellerId`: only that seller's product). */
export function submitProduct(db: Db, productId: string, opts: { sellerId?: string } = {}): Promise<ProductStatusOut> {
  return move(db, productId, 'draft', 'proposed', null, opts.sellerId);
}

/** The review's approval: proposed → published. */
export function approveProduct(db: Db, productId: string): Promise<ProductStatusOut> {
  return move(db, productId, 'proposed', 'published', null);
}

/** The review's refusal: proposed → rejected, with the reason the seller sees. */
export function rejectProduct(db: Db, productId: string, reason: string): Promise<ProductStatusOut> {
  return move(db, productId, 'proposed', 'rejected', nonBlank(reason, 'reason'));
}

/** The seller's dashboard resubmit: rejected → proposed (the old rejection reason is cleared). */
export function resubmitProduct(
  db: Db,
  productId: string,
  opts: { sellerId?: string } = {},
): Promise<ProductStatusOut> {
  return move(db, productId, 'rejected', 'proposed', null, opts.sellerId);
}

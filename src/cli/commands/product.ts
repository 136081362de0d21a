import { approveProduct, rejectProduct, resubmitProduct, submitProduct } from '../../ops/product-review';
import { addVariant, createCatalogProduct } from '../../ops/products';
import { setUnitCost } from '../../ops/pricing';
import { nameValuePairs } from '../args';
import type { CommandTable } from '../command';

/** `product …`: catalog products, variants, review transitions and unit costs. */
export const productCommands: CommandTable = {
  'product create-catalog': {
    flags: { seller: 'value', sku: 'value', title: 'value', price: 'value', description: 'value', categories: 'value' },
    run: (f, { db }) =>
      createCatalogProduct(db, {
        sellerId: f.required('seller'),
        sku: f.required('sku'),
        title: f.required('title'),
        price: f.integer('price'),
        description: f.optional('description'),
        categoryIds: f.list('categories'),
      }),
  },
  'product add-variant': {
    flags: { product: 'value', sku: 'value', price: 'value', option: 'repeated' },
    run: (f, { db }) =>
      addVariant(db, {
        productId: f.required('product'),
        sku: f.required('sku'),
        price: f.integer('price'),
        options: nameValuePairs('option', f.repeated('option')),
      }),
  },
  'product submit': {
    flags: { product: 'value' },
    run: (f, { db }) => submitProduct(db, f.required('product')),
  },
  'product approve': {
    flags: { product: 'value' },
    run: (f, { db }) => approveProduct(db, f.required('product')),
  },
  'product resubmit': {
    flags: { product: 'value' },
    run: (f, { db }) => resubmitProduct(db, f.required('product')),
  },
  'product reject': {
    flags: { product: 'value', reason: 'value' },
    run: (f, { db }) => rejectProduct(db, f.required('product'), f.required('reason')),
  },
  'product set-unit-cost': {
    flags: { seller: 'value', sku: 'value', cost: 'value' },
    run: (f, { db }) =>
      setUnitCost(db, { sellerId: f.required('seller'), sku: f.required('sku'), cost: f.integer('cost') }),
  },
};

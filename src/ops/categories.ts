import type { Db } from '../db/knex';
import { newId } from '../lib/ids';
import { nonBlank } from './checks';

export interface CategoryOut {
  category_id: string;
  name: string;
  catalog_only: boolean;
}

/** Creates a category; a catalog-only one accepts only catalog-managed products. */
export async function createCategory(db: Db, input: { name: string; catalogOnly?: boolean }): Promise<CategoryOut> {
  const name = nonBlank(input.name, 'name');
  const category = { id: newId('cat'), name, catalog_only: input.catalogOnly ?? false };
  await db('categories').insert(category);
  return { category_id: category.id, name, catalog_only: category.catalog_only };
}

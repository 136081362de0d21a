import { createCategory } from '../../ops/categories';
import type { CommandTable } from '../command';

/** `category …` */
export const categoryCommands: CommandTable = {
  'category create': {
    flags: { name: 'value', 'catalog-only': 'boolean' },
    run: (f, { db }) => createCategory(db, { name: f.required('name'), catalogOnly: f.boolean('catalog-only') }),
  },
};

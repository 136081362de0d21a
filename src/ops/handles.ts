import { randomString } from '../lib/ids';

const SUFFIX_ALPHABET = '0123456789abcdefghijklmnopqrstuvwxyz';

/** A URL slug for a product: the title's ASCII slug (or `product`) plus a random suffix for uniqueness. */
export function productHandle(title: string): string {
  const slug = title
    .normalize('NFKD')
    .toLowerCase()
    .replace(/[^a-z0-9]+/g, '-')
    .replace(/^-+|-+$/g, '')
    .slice(0, 60)
    .replace(/-+$/, '');
  return `${slug || 'product'}-${randomString(6, SUFFIX_ALPHABET)}`;
}

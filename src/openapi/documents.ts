import { checkoutDocument } from './checkout';
import { partnerDocument } from './partner';

/** The committed copies under docs/openapi/, by file name, and what generates each. */
export const documents = {
  'checkout.json': checkoutDocument,
  'partner.json': partnerDocument,
} as const;

/** A document as committed: two-space JSON with a final newline. */
export const documentText = (doc: unknown) => `${JSON.stringify(doc, null, 2)}\n`;

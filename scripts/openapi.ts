import { writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { documents, documentText } from '../src/openapi/documents';

/** `npm run openapi`: regenerates docs/openapi/*.json from the zod schemas (npm test checks they match). */
for (const [file, make] of Object.entries(documents)) {
  const path = join(__dirname, '..', 'docs', 'openapi', file);
  writeFileSync(path, documentText(make()));
  console.log(`wrote ${path}`);
}

import type { Connection } from '@temporalio/client';
import { temporal } from '@temporalio/proto';
import { searchAttributeKeys } from './search-attributes';

/**
 * Registers every custom search attribute on a server that has an operator service but no
 * start-up flag for them (the time-skipping test server); attributes it has already are kept.
 */
export async function registerSearchAttributes(connection: Connection, namespace: string): Promise<void> {
  const keyword = temporal.api.enums.v1.IndexedValueType.INDEXED_VALUE_TYPE_KEYWORD;
  await connection.operatorService.addSearchAttributes({
    namespace,
    searchAttributes: Object.fromEntries(searchAttributeKeys.map((key) => [key.name, keyword])),
  });
}

/** `--search-attribute Name=Keyword` flags for `temporal server start-dev`. */
export const devServerSearchAttributeFlags = (): string[] =>
  searchAttributeKeys.flatMap((key) => ['--search-attribute', `${key.name}=Keyword`]);

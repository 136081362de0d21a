import type { OperatorService } from '@temporalio/client';
import { temporal } from '@temporalio/proto';
import { searchAttributeKeys } from './search-attributes';

/** What the search-attribute calls need of a connection (the client's `Connection` or the worker's `NativeConnection`). */
export interface OperatorConnection {
  operatorService: OperatorService;
}

/**
 * Registers every custom search attribute on a server that has an operator service but no
 * start-up flag for them (the time-skipping test server); attributes it has already are kept.
 */
export async function registerSearchAttributes(connection: OperatorConnection, namespace: string): Promise<void> {
  const keyword = temporal.api.enums.v1.IndexedValueType.INDEXED_VALUE_TYPE_KEYWORD;
  await connection.operatorService.addSearchAttributes({
    namespace,
    searchAttributes: Object.fromEntries(searchAttributeKeys.map((key) => [key.name, keyword])),
  });
}

/** The names of our custom search attributes that `namespace` lacks (empty when it has them all). */
export async function missingSearchAttributes(connection: OperatorConnection, namespace: string): Promise<string[]> {
  const { customAttributes } = await connection.operatorService.listSearchAttributes({ namespace });
  return searchAttributeKeys.map((key) => key.name).filter((name) => !customAttributes?.[name]);
}

/** `--search-attribute Name=Keyword` flags for `temporal server start-dev`. */
export const devServerSearchAttributeFlags = (): string[] =>
  searchAttributeKeys.flatMap((key) => ['--search-attribute', `${key.name}=Keyword`]);

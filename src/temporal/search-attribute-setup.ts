import type { OperatorService } from '@temporalio/client';
import { temporal } from '@temporalio/proto';
import { temporalErrorCause } from './grpc-error';
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

/** gRPC statuses of a server that does not let this client list search attributes (Temporal Cloud without operator rights). */
const CANNOT_LIST = new Set(['UNIMPLEMENTED', 'PERMISSION_DENIED']);

/**
 * The names of our custom search attributes that `namespace` lacks (empty when it has them all);
 * null when the server does not let us list them, which then cannot be checked from here.
 */
export async function missingSearchAttributes(
  connection: OperatorConnection,
  namespace: string,
): Promise<string[] | null> {
  try {
    const { customAttributes } = await connection.operatorService.listSearchAttributes({ namespace });
    return searchAttributeKeys.map((key) => key.name).filter((name) => !customAttributes?.[name]);
  } catch (err) {
    if (CANNOT_LIST.has(temporalErrorCause(err).grpc_status)) return null;
    throw err;
  }
}

/** The `temporal` CLI arguments that create our search attributes in `namespace` (`npm run cluster` runs them). */
export const searchAttributeCreateArgs = (namespace: string, names: readonly string[]): string[] => [
  'operator',
  'search-attribute',
  'create',
  '--namespace',
  namespace,
  ...names.flatMap((n) => ['--name', n, '--type', 'Keyword']),
];

/** The CLI command that creates our search attributes in `namespace`, for an operator to run. */
export const searchAttributeCreateCommand = (namespace: string, names: readonly string[]): string =>
  `temporal ${searchAttributeCreateArgs(namespace, names).join(' ')}`;

/**
 * Makes sure `namespace` has every custom search attribute before a process starts workflows or
 * polls for them (without them every start and every search-attribute update fails, and retries
 * forever). Missing ones are registered when `register` is on and the server allows it (a dev
 * server, a self-hosted cluster with operator rights); otherwise this throws an error naming the
 * command that creates them.
 */
export async function ensureSearchAttributes(
  connection: OperatorConnection,
  namespace: string,
  register: boolean,
): Promise<{ registered: string[]; unchecked?: boolean }> {
  const missing = await missingSearchAttributes(connection, namespace);
  if (missing === null) return { registered: [], unchecked: true };
  if (missing.length === 0) return { registered: [] };
  const refuse = (why: string) =>
    new Error(
      `Temporal namespace ${namespace} lacks the search attributes ${missing.join(', ')} (${why}). ` +
        `Create them with: ${searchAttributeCreateCommand(namespace, missing)}`,
    );
  if (!register) throw refuse('TEMPORAL_SEARCH_ATTRIBUTES=check');
  try {
    await registerSearchAttributes(connection, namespace);
  } catch (err) {
    const cause = temporalErrorCause(err);
    throw refuse(`registering them failed: ${cause.grpc_status} ${cause.grpc_message ?? cause.error}`);
  }
  return { registered: missing };
}

/** `--search-attribute Name=Keyword` flags for `temporal server start-dev`. */
export const devServerSearchAttributeFlags = (): string[] =>
  searchAttributeKeys.flatMap((key) => ['--search-attribute', `${key.name}=Keyword`]);

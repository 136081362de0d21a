import { parseScopes } from '../keys/scopes';
import { OpsError } from '../ops/errors';

/** A comma-separated scope list checked against `known`; an unknown scope is `invalid_scopes`. */
export function scopeList<S extends string>(list: string, known: readonly S[]): S[] {
  try {
    return parseScopes(list, known);
  } catch (err) {
    throw new OpsError('invalid_scopes', (err as Error).message);
  }
}

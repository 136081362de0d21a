import { Counter } from 'prom-client';
import type { RowResult } from '../partner/rows';
import { registry } from './metrics';

const bulkRows = new Counter({
  name: 'svc_partner_bulk_rows_total',
  help: 'Partner bulk rows, by route (products, inventory), outcome (accepted, rejected) and row code (the error code, or ok).',
  labelNames: ['route', 'outcome', 'code'] as const,
  registers: [registry],
});

/** Counts the rows of a bulk request that was written (called with its results, after its transactions committed). */
export function countBulkRows(route: 'products' | 'inventory', results: readonly RowResult[]): readonly RowResult[] {
  for (const row of results) bulkRows.inc({ route, outcome: row.status, code: row.error?.code ?? 'ok' });
  return results;
}

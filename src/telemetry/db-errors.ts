import { Counter } from 'prom-client';
import { registry } from './metrics';

/** SQLSTATE classes that say the server is in trouble (connection, resources, operator, system, internal): counted by their full code. */
const SERVER_TROUBLE_CLASSES = new Set(['08', '53', '57', '58', 'XX']);

const dbErrorsTotal = new Counter({
  name: 'svc_db_errors_total',
  help: 'Statements Postgres answered with an error, by sqlstate: the full SQLSTATE for classes 08, 53, 57, 58 and XX (53100 disk_full: could not extend a file or write WAL), else its class followed by 000 (23000: any integrity violation).',
  labelNames: ['sqlstate'] as const,
  registers: [registry],
});
// Disk full is what PostgresDiskFull reads: present from the start, so its first error is an increase.
dbErrorsTotal.inc({ sqlstate: '53100' }, 0);

/** The `sqlstate` label of `code` (bounded: a class of the standard, or one of the few codes of the trouble classes). */
export function sqlstateLabel(code: string): string {
  const cls = code.slice(0, 2);
  return SERVER_TROUBLE_CLASSES.has(cls) ? code : `${cls}000`;
}

/** Counts `err` when it is an error Postgres answered (it carries a SQLSTATE); anything else (a lost socket) is not. */
export function countDbError(err: unknown): void {
  const { code, severity } = (err ?? {}) as { code?: unknown; severity?: unknown };
  if (typeof code === 'string' && /^[0-9A-Z]{5}$/.test(code) && severity !== undefined)
    dbErrorsTotal.inc({ sqlstate: sqlstateLabel(code) });
}

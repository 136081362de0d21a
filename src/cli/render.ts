/** Output of a command run: what goes to stdout and stderr, and the exit status. */
export interface CliResult {
  exitCode: number;
  stdout: string;
  stderr: string;
}

type Json = null | boolean | number | string | Json[] | { [key: string]: Json };

/** A scalar as a table cell; nested values as compact JSON. */
function cell(value: Json): string {
  if (value === null) return '-';
  if (Array.isArray(value) && value.length === 0) return '(none)';
  if (Array.isArray(value) && value.every((v) => typeof v !== 'object' || v === null)) return value.join(', ');
  return typeof value === 'object' ? JSON.stringify(value) : String(value);
}

function isRowList(value: Json): value is Array<{ [key: string]: Json }> {
  return (
    Array.isArray(value) &&
    value.length > 0 &&
    value.every((v) => typeof v === 'object' && v !== null && !Array.isArray(v))
  );
}

/** Rows as an aligned table with a header of the union of their keys. */
function table(rows: Array<{ [key: string]: Json }>, indent: string): string[] {
  const columns = [...new Set(rows.flatMap((r) => Object.keys(r)))];
  const cells = [columns, ...rows.map((r) => columns.map((c) => cell(r[c] ?? null)))];
  const widths = columns.map((_, i) => Math.max(...cells.map((line) => line[i].length)));
  return cells.map(
    (line) =>
      indent +
      line
        .map((v, i) => v.padEnd(widths[i]))
        .join('  ')
        .trimEnd(),
  );
}

/** An object as aligned `key  value` lines; lists of objects become tables, nested objects indent. */
function keyValues(doc: { [key: string]: Json }, indent: string): string[] {
  const width = Math.max(0, ...Object.keys(doc).map((k) => k.length));
  return Object.entries(doc).flatMap(([key, value]) => {
    if (isRowList(value)) return [`${indent}${key}:`, ...table(value, `${indent}  `)];
    if (value !== null && typeof value === 'object' && !Array.isArray(value)) {
      return [`${indent}${key}:`, ...keyValues(value, `${indent}  `)];
    }
    return [`${indent}${key.padEnd(width)}  ${cell(value)}`];
  });
}

/** A command's result for a person: key-value lines and tables. */
export function renderText(result: object): string {
  return `${keyValues(JSON.parse(JSON.stringify(result)) as { [key: string]: Json }, '').join('\n')}\n`;
}

/** A command's result as the one JSON document printed with `--json`. */
export function renderJson(result: object): string {
  return `${JSON.stringify(result, null, 2)}\n`;
}

/** A refusal: with `--json` the error document on stdout, otherwise one line on stderr. */
export function renderError(code: string, message: string, json: boolean): CliResult {
  return json
    ? { exitCode: 1, stdout: renderJson({ error: { code, message } }), stderr: '' }
    : { exitCode: 1, stdout: '', stderr: `error: ${message} (${code})\n` };
}

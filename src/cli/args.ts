import { parseArgs } from 'node:util';
import { OpsError } from '../ops/errors';

/** How a flag takes its value: `--f v` / `--f=v` (once), present-or-absent, or repeatable. */
export type FlagKind = 'value' | 'boolean' | 'repeated';
export type FlagSpec = Readonly<Record<string, FlagKind>>;

const WHOLE_NUMBER = /^-?\d+$/;
const ISO_TIMESTAMP = /^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}(:\d{2}(\.\d{1,9})?)?(Z|[+-]\d{2}:?\d{2})$/i;

function invalid(name: string, message: string): OpsError {
  return new OpsError('invalid_flag', `--${name} ${message}`);
}

/** Parsed flags with typed readers; a missing required flag is `missing_flag`, a bad value `invalid_flag`. */
export class Flags {
  constructor(private readonly values: ReadonlyMap<string, string | true | string[]>) {}

  optional(name: string): string | undefined {
    const v = this.values.get(name);
    return typeof v === 'string' ? v : undefined;
  }

  required(name: string): string {
    const v = this.optional(name);
    if (v === undefined) throw new OpsError('missing_flag', `--${name} is required`);
    return v;
  }

  boolean(name: string): boolean {
    return this.values.get(name) === true;
  }

  repeated(name: string): string[] {
    const v = this.values.get(name);
    return Array.isArray(v) ? v : [];
  }

  /** A whole number; range checks belong to the service. */
  integer(name: string): number {
    return this.wholeNumber(name, this.required(name));
  }

  /** A whole number, or undefined when the flag is absent. */
  optionalInteger(name: string): number | undefined {
    const v = this.optional(name);
    return v === undefined ? undefined : this.wholeNumber(name, v);
  }

  /** One of `allowed`. */
  oneOf<T extends string>(name: string, allowed: readonly T[]): T {
    const v = this.required(name);
    if (!(allowed as readonly string[]).includes(v)) {
      throw invalid(name, `must be one of ${allowed.join(', ')}, got "${v}"`);
    }
    return v as T;
  }

  /** A comma-separated list, items trimmed, blanks dropped; undefined when the flag is absent. */
  list(name: string): string[] | undefined {
    const v = this.optional(name);
    return v === undefined ? undefined : splitList(v);
  }

  /** An ISO 8601 timestamp with a zone (`Z` or an offset). */
  timestamp(name: string): Date | undefined {
    const v = this.optional(name);
    if (v === undefined) return undefined;
    const date = new Date(v);
    if (!ISO_TIMESTAMP.test(v) || Number.isNaN(date.getTime()) || !isCalendarDate(v.slice(0, 10))) {
      throw invalid(name, `must be an ISO 8601 time with a zone, e.g. 2026-11-21T10:00:00Z; got "${v}"`);
    }
    return date;
  }

  private wholeNumber(name: string, v: string): number {
    const n = Number(v);
    if (!WHOLE_NUMBER.test(v) || !Number.isSafeInteger(n)) throw invalid(name, `must be a whole number, got "${v}"`);
    return n;
  }
}

/** True when `yyyy-mm-dd` names a real day (Date would roll 2026-02-30 over to March). */
function isCalendarDate(ymd: string): boolean {
  const [y, m, d] = ymd.split('-').map(Number);
  const date = new Date(Date.UTC(y, m - 1, d));
  return date.getUTCMonth() === m - 1 && date.getUTCDate() === d;
}

/** `a, b,,c` → `['a', 'b', 'c']`. */
export function splitList(value: string): string[] {
  return value
    .split(',')
    .map((s) => s.trim())
    .filter(Boolean);
}

/** `--option Name=Value` values as a map; a repeated name or a missing `=` is `invalid_flag`. */
export function nameValuePairs(name: string, values: string[]): Record<string, string> {
  const out: Record<string, string> = {};
  for (const pair of values) {
    const at = pair.indexOf('=');
    if (at <= 0) throw invalid(name, `must be Name=Value, got "${pair}"`);
    const key = pair.slice(0, at).trim();
    if (key in out) throw invalid(name, `names ${key} twice`);
    out[key] = pair.slice(at + 1).trim();
  }
  return out;
}

/**
 * Splits argv into the command words (the leading tokens that are not flags) and the rest, and
 * pulls out the global `--json` flag wherever it appears.
 */
export function splitCommand(argv: readonly string[]): { words: string[]; rest: string[]; json: boolean } {
  const tokens = argv.filter((t) => t !== '--json');
  const firstFlag = tokens.findIndex((t) => t.startsWith('-'));
  const cut = firstFlag === -1 ? tokens.length : firstFlag;
  return { words: tokens.slice(0, cut), rest: tokens.slice(cut), json: tokens.length !== argv.length };
}

/**
 * Parses `--flag value`, `--flag=value`, boolean `--flag` and repeated flags, accepting only those in
 * `spec`. node:util's parseArgs reads the tokens; it runs loose so that a value may start with one
 * dash (`--delta -3`, which strict mode calls ambiguous), and the checks below are what strict mode
 * would refuse, with the CLI's error codes.
 */
export function parseFlags(tokens: readonly string[], spec: FlagSpec): Flags {
  const options = Object.fromEntries(
    Object.entries(spec).map(([name, kind]) => [name, { type: kind === 'boolean' ? 'boolean' : 'string' } as const]),
  );
  const parsed = parseArgs({ args: [...tokens], options, strict: false, allowPositionals: true, tokens: true });
  const values = new Map<string, string | true | string[]>();
  for (const token of parsed.tokens) {
    if (token.kind !== 'option') throw new OpsError('invalid_flag', `unexpected argument "${tokens[token.index]}"`);
    const { name, value, inlineValue } = token;
    const kind = spec[name];
    if (!kind || token.rawName !== `--${name}`) throw new OpsError('unknown_flag', `unknown flag ${token.rawName}`);
    if (kind === 'boolean') {
      if (value !== undefined) throw invalid(name, 'takes no value');
      values.set(name, true);
      continue;
    }
    // Loose parsing takes the next token whatever it is; a flag there means this one has no value.
    if (value === undefined || (!inlineValue && value.startsWith('--'))) throw invalid(name, 'needs a value');
    if (kind === 'repeated') {
      values.set(name, [...((values.get(name) as string[] | undefined) ?? []), value]);
    } else {
      if (values.has(name)) throw invalid(name, 'is given twice');
      values.set(name, value);
    }
  }
  return new Flags(values);
}

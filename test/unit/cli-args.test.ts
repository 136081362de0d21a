import { nameValuePairs, parseFlags, splitCommand } from '../../src/cli/args';
import { parseItems } from '../../src/cli/commands/order';
import { renderText } from '../../src/cli/render';

/** The OpsError code a call throws. */
function codeOf(fn: () => unknown): string | undefined {
  try {
    fn();
  } catch (err) {
    return (err as { code?: string }).code;
  }
  return undefined;
}

describe('splitCommand', () => {
  it('takes the leading words as the command and --json from anywhere', () => {
    expect(splitCommand(['order', 'create', '--seller', 's', '--json'])).toEqual({
      words: ['order', 'create'],
      rest: ['--seller', 's'],
      json: true,
    });
    expect(splitCommand(['--json', 'demo']).json).toBe(true);
  });
});

describe('parseFlags', () => {
  const spec = { name: 'value', level: 'value', 'test-merchant': 'boolean', option: 'repeated' } as const;

  it('reads --flag value, --flag=value, booleans and repeated flags', () => {
    const f = parseFlags(['--name', 'A b', '--level=-1.5', '--test-merchant', '--option', 'X=1', '--option=Y=2'], spec);
    expect([f.required('name'), f.required('level'), f.boolean('test-merchant'), f.repeated('option')]).toEqual([
      'A b',
      '-1.5',
      true,
      ['X=1', 'Y=2'],
    ]);
  });

  it('takes a value that starts with one dash', () => {
    expect(parseFlags(['--level', '-3'], spec).integer('level')).toBe(-3);
  });

  it('refuses unknown flags, missing values, repeats of single flags and stray words', () => {
    expect(codeOf(() => parseFlags(['--colour', 'red'], spec))).toBe('unknown_flag');
    expect(codeOf(() => parseFlags(['--name', '--level', '1'], spec))).toBe('invalid_flag');
    expect(codeOf(() => parseFlags(['--name', 'a', '--name', 'b'], spec))).toBe('invalid_flag');
    expect(codeOf(() => parseFlags(['--name', 'a', 'b'], spec))).toBe('invalid_flag');
    expect(codeOf(() => parseFlags(['--test-merchant=yes'], spec))).toBe('invalid_flag');
    expect(codeOf(() => parseFlags(['--name'], spec))).toBe('invalid_flag');
    expect(codeOf(() => parseFlags(['-n', 'a'], spec))).toBe('unknown_flag');
    expect(codeOf(() => parseFlags(['--name', 'a', '--', 'b'], spec))).toBe('invalid_flag');
  });

  it('takes a value that starts with two dashes only after =', () => {
    expect(parseFlags(['--name=--x'], spec).required('name')).toBe('--x');
  });

  it('reports a missing required flag as missing_flag and a non-integer as invalid_flag', () => {
    const f = parseFlags(['--level', '1.5'], spec);
    expect(codeOf(() => f.required('name'))).toBe('missing_flag');
    expect(codeOf(() => f.integer('level'))).toBe('invalid_flag');
  });

  it('accepts timestamps with a zone only, and only real dates', () => {
    const at = (v: string) => parseFlags(['--name', v], spec).timestamp('name');
    expect(at('2026-11-21T10:00:00+03:00')?.toISOString()).toBe('2026-11-21T07:00:00.000Z');
    expect(codeOf(() => at('2026-11-21T10:00:00'))).toBe('invalid_flag');
    expect(codeOf(() => at('2026-02-30T10:00:00Z'))).toBe('invalid_flag');
    expect(codeOf(() => at('2026-11-21'))).toBe('invalid_flag');
  });
});

describe('nameValuePairs', () => {
  it('splits at the first = and refuses a repeated name', () => {
    expect(nameValuePairs('option', ['Size=L', 'Note=a=b'])).toEqual({ Size: 'L', Note: 'a=b' });
    expect(codeOf(() => nameValuePairs('option', ['Size=L', 'Size=M']))).toBe('invalid_flag');
    expect(codeOf(() => nameValuePairs('option', ['=L']))).toBe('invalid_flag');
  });
});

describe('parseItems', () => {
  it('reads SKU:QTY and SKU:QTY:UNIT_PRICE entries', () => {
    expect(parseItems('A:2, B:1:3000')).toEqual([
      { sku: 'A', quantity: 2, unitPrice: undefined },
      { sku: 'B', quantity: 1, unitPrice: 3000 },
    ]);
  });

  it.each(['A', 'A:x', 'A:1:2:3', ':1', 'A:1:-5', ''])('refuses %p', (items) => {
    expect(codeOf(() => parseItems(items))).toBe('invalid_flag');
  });
});

describe('renderText', () => {
  it('prints scalars as aligned key-values and lists of objects as tables', () => {
    expect(
      renderText({
        seller_id: 's1',
        locations: [{ id: 'l1', name: 'Primary' }],
        tags: ['a', 'b'],
        note: null,
        none: [],
      }),
    ).toBe(
      [
        'seller_id  s1',
        'locations:',
        '  id  name',
        '  l1  Primary',
        'tags       a, b',
        'note       -',
        'none       (none)',
        '',
      ].join('\n'),
    );
  });
});

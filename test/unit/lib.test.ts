import { loadSettings } from '../../src/config';
import { canonicalJson, constantTimeEqual } from '../../src/lib/hash';
import { newId } from '../../src/lib/ids';

describe('canonicalJson', () => {
  it('serialises JSON-equal documents identically', () => {
    expect(canonicalJson({ b: [1, { y: 2, x: 1 }], a: 'x' })).toBe(canonicalJson({ a: 'x', b: [1, { x: 1, y: 2 }] }));
    expect(canonicalJson({ a: [1, 2] })).not.toBe(canonicalJson({ a: [2, 1] }));
    expect(canonicalJson(null)).toBe('null');
  });

  it('gives the same text whether or not the keys already come sorted (hashes stored before the fast path still match)', () => {
    // Sorted keys, no undefined: serialised as they are.
    expect(canonicalJson({ a: 1, b: [{ c: null, d: 'x' }] })).toBe('{"a":1,"b":[{"c":null,"d":"x"}]}');
    // Unsorted at any depth, undefined values, and integer-like keys (which objects keep in numeric order).
    expect(canonicalJson({ a: [{ z: 1, y: 2 }] })).toBe('{"a":[{"y":2,"z":1}]}');
    expect(canonicalJson({ a: 1, b: undefined, c: [undefined] })).toBe('{"a":1,"c":[null]}');
    expect(canonicalJson({ 10: 'ten', 9: 'nine', a: 'a' })).toBe('{"10":"ten","9":"nine","a":"a"}');
    // Not a plain object: taken apart as an object, as always.
    expect(canonicalJson({ at: new Date(0) })).toBe('{"at":{}}');
  });
});

describe('constantTimeEqual', () => {
  it('compares strings of any length', () => {
    expect(constantTimeEqual('abc', 'abc')).toBe(true);
    expect(constantTimeEqual('abc', 'abd')).toBe(false);
    expect(constantTimeEqual('abc', 'abcd')).toBe(false);
  });
});

describe('ids', () => {
  it('prefixes ids with their type and mode', () => {
    expect(newId('sel')).toMatch(/^sel_[0-9a-z]{28}$/);
    expect(newId('cs', 'test')).toMatch(/^cs_test_[0-9a-z]{28}$/);
  });

  it('gives every id 80 fresh random bits after its time prefix: a neighbour never reveals another id', () => {
    const ids = Array.from({ length: 2000 }, (_, i) => newId(i % 2 ? 'pa' : 'cs', 'test'));
    const random = (id: string) => id.slice(-16);
    expect(new Set(ids.map(random)).size).toBe(ids.length);
    // Ids made one after another, even of different types in one millisecond, share no run of the
    // random part (with 80 random bits, eight equal leading characters are a 1 in 2^40 event).
    const related = ids.slice(1).filter((id, i) => random(id).slice(0, 8) === random(ids[i]).slice(0, 8));
    expect(related).toEqual([]);
  });

  it('keeps ids made in the same millisecond in creation order', () => {
    const ids = Array.from({ length: 2000 }, () => newId('prod'));
    expect([...ids].sort()).toEqual(ids);
    expect(new Set(ids).size).toBe(ids.length);
  });

  it('sorts ids from later milliseconds after earlier ones', async () => {
    const first = newId('prod');
    await new Promise((r) => setTimeout(r, 3));
    expect(first < newId('prod')).toBe(true);
  });
});

describe('loadSettings', () => {
  it('applies the documented defaults', () => {
    const s = loadSettings({});
    expect(s).toMatchObject({
      PORT: 3000,
      DATA_DIR: '.data',
      TEMPORAL_NAMESPACE: 'default',
      PARTNER_ENVIRONMENT: 'sandbox',
      PUBLIC_BASE_URL: 'http://localhost:3000',
      WEBHOOK_ALLOWED_HOSTS: [],
      TEST_PHONE: '+9647700000000',
    });
  });

  it('trusts no proxy by default, or the number of hops TRUST_PROXY names', () => {
    expect(loadSettings({}).TRUST_PROXY).toBe(0);
    expect(loadSettings({ TRUST_PROXY: 'off' }).TRUST_PROXY).toBe(0);
    expect(loadSettings({ TRUST_PROXY: '2' }).TRUST_PROXY).toBe(2);
    expect(() => loadSettings({ TRUST_PROXY: 'true' })).toThrow(/TRUST_PROXY/);
  });

  it('allows OTP codes to Iraq (+964) by default; OTP_ALLOWED_COUNTRY_CODES lists calling codes', () => {
    expect(loadSettings({}).OTP_ALLOWED_COUNTRY_CODES).toEqual(['964']);
    expect(loadSettings({ OTP_ALLOWED_COUNTRY_CODES: '964, +971' }).OTP_ALLOWED_COUNTRY_CODES).toEqual(['964', '971']);
    expect(() => loadSettings({ OTP_ALLOWED_COUNTRY_CODES: 'IQ' })).toThrow(/OTP_ALLOWED_COUNTRY_CODES/);
  });

  it('drains 5 s and bounds work in flight to 15 s on a stop; the bound must exceed the webhook POST timeout', () => {
    expect(loadSettings({})).toMatchObject({ SHUTDOWN_DRAIN_MS: 5000, SHUTDOWN_TIMEOUT_MS: 15_000 });
    expect(loadSettings({ SHUTDOWN_DRAIN_MS: '0', SHUTDOWN_TIMEOUT_MS: '10001' })).toMatchObject({
      SHUTDOWN_DRAIN_MS: 0,
      SHUTDOWN_TIMEOUT_MS: 10_001,
    });
    expect(() => loadSettings({ SHUTDOWN_TIMEOUT_MS: '10000' })).toThrow(
      /SHUTDOWN_TIMEOUT_MS: must exceed the webhook POST timeout/,
    );
    expect(() => loadSettings({ SHUTDOWN_DRAIN_MS: '-1' })).toThrow(/SHUTDOWN_DRAIN_MS/);
  });

  it('bounds every Postgres wait and Temporal call by default; the query deadline follows the statement one', () => {
    expect(loadSettings({})).toMatchObject({
      DB_STATEMENT_TIMEOUT_MS: 5000,
      DB_QUERY_TIMEOUT_MS: 6000,
      DB_CONNECT_TIMEOUT_MS: 5000,
      DB_POOL_ACQUIRE_TIMEOUT_MS: 5000,
      DB_IDLE_IN_TRANSACTION_TIMEOUT_MS: 60_000,
      DB_KEEPALIVE_INITIAL_DELAY_MS: 10_000,
      TEMPORAL_CALL_TIMEOUT_MS: 5000,
    });
    expect(loadSettings({ DB_STATEMENT_TIMEOUT_MS: '20000' }).DB_QUERY_TIMEOUT_MS).toBe(21_000);
    expect(loadSettings({ DB_STATEMENT_TIMEOUT_MS: '20000', DB_QUERY_TIMEOUT_MS: '20500' }).DB_QUERY_TIMEOUT_MS).toBe(
      20_500,
    );
    expect(() => loadSettings({ DB_STATEMENT_TIMEOUT_MS: '20000', DB_QUERY_TIMEOUT_MS: '20000' })).toThrow(
      /DB_QUERY_TIMEOUT_MS: must be at least DB_STATEMENT_TIMEOUT_MS \+ 500/,
    );
    expect(() => loadSettings({ DB_POOL_ACQUIRE_TIMEOUT_MS: '0' })).toThrow(/DB_POOL_ACQUIRE_TIMEOUT_MS/);
    expect(() => loadSettings({ TEMPORAL_CALL_TIMEOUT_MS: 'never' })).toThrow(/TEMPORAL_CALL_TIMEOUT_MS/);
  });

  it('treats an empty variable as unset', () => {
    expect(loadSettings({ PORT: '', WEBHOOK_SECRET_KEY: '', DATABASE_URL: '' })).toMatchObject({ PORT: 3000 });
    expect(loadSettings({ WEBHOOK_SECRET_KEY: '' }).WEBHOOK_SECRET_KEY).toBeUndefined();
  });

  it('parses the webhook allow-list and names every bad setting', () => {
    expect(loadSettings({ WEBHOOK_ALLOWED_HOSTS: ' Hooks.Local , a.test,' }).WEBHOOK_ALLOWED_HOSTS).toEqual([
      'hooks.local',
      'a.test',
    ]);
    expect(() => loadSettings({ PARTNER_ENVIRONMENT: 'prod', PORT: 'x' })).toThrow(
      /PARTNER_ENVIRONMENT[\s\S]*PORT|PORT[\s\S]*PARTNER_ENVIRONMENT/,
    );
  });
});

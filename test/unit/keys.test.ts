import { bearer, generateKey, parseKey, secretMatches } from '../../src/keys/keys';
import { parseScopes, partnerScopes } from '../../src/keys/scopes';

describe('parseKey', () => {
  it('parses a key whose id and secret contain _ and - without splitting on them', () => {
    const keyId = '__--__--__--';
    const secret = '-_a_b_c-d-e_f-g_h-i_j-k_l-m_n-o_';
    expect(secret).toHaveLength(32);
    expect(parseKey(`svc_sk_live_${keyId}_${secret}`)).toEqual({ kind: 'sk', mode: 'live', keyId, secret });
  });

  it.each([
    'svc_sk_test_short_secret',
    'svc_xx_test_aaaaaaaaaaaa_bbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbb',
    'svc_sk_prod_aaaaaaaaaaaa_bbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbb',
    'svc_sk_test_aaaaaaaaaaaa_bbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbb',
    'svc_sk_test_aaaaaaaaaaaa_bbbbbbbbbbbbbbbbbbbbbbbbbbbbbbb!',
    ' svc_sk_test_aaaaaaaaaaaa_bbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbb',
  ])('refuses %s', (key) => {
    expect(parseKey(key)).toBeNull();
  });

  it('round-trips generated keys of every kind and mode', () => {
    for (const kind of ['sk', 'ck', 'pk'] as const) {
      for (const mode of ['test', 'live'] as const) {
        const made = generateKey(kind, mode);
        const parsed = parseKey(made.key)!;
        expect(parsed).toMatchObject({ kind, mode, keyId: made.keyId });
        expect(secretMatches(parsed.secret, made.secretHash)).toBe(true);
        expect(secretMatches(`${parsed.secret.slice(1)}x`, made.secretHash)).toBe(false);
      }
    }
  });
});

describe('bearer', () => {
  it('takes exactly "Bearer" and one space', () => {
    expect(bearer('Bearer abc')).toBe('abc');
    expect(bearer('bearer abc')).toBeNull();
    expect(bearer('Bearer  abc')).toBeNull();
    expect(bearer('Bearer abc def')).toBeNull();
    expect(bearer('Bearer ')).toBeNull();
    expect(bearer(undefined)).toBeNull();
  });
});

describe('parseScopes', () => {
  it('splits, trims and de-duplicates known scopes, and names an unknown one', () => {
    expect(parseScopes(' catalog:read,orders:read,catalog:read ', partnerScopes)).toEqual([
      'catalog:read',
      'orders:read',
    ]);
    expect(() => parseScopes('catalog:read,catalog:delete', partnerScopes)).toThrow('catalog:delete');
  });
});

import { hostedKeys } from '../../src/hosted/hosted-keys';
import { parseKey } from '../../src/keys/keys';
import { revokeCheckoutKey } from '../../src/ops/checkout-keys';
import { webhookRuntime } from '../../src/webhooks/runtime';
import { createSession, payableBody, shopper } from '../helpers/checkout-payments';
import { buildMerchant } from '../helpers/factories';
import { startStack, Stack } from '../helpers/stack';

/**
 * The hosted page's own publishable keys: made on first need, one per merchant and mode even
 * under concurrent first loads, kept only encrypted, accepted by the public routes like any
 * publishable key, and replaced after the operator revokes one.
 */
let stack: Stack;
let keys: ReturnType<typeof hostedKeys>;
beforeAll(async () => {
  stack = await startStack();
  keys = hostedKeys(stack.db, (stack.deps.webhooks ?? webhookRuntime(stack.settings)).cipher);
});
afterAll(() => stack.stop());

const stored = (merchantId: string) => stack.db('hosted_page_keys').where({ merchant_id: merchantId });

it('makes one key per merchant and mode on first need, even when first loads race', async () => {
  const m = await buildMerchant(stack.db);
  const made = await Promise.all(Array.from({ length: 6 }, () => keys.forMerchant(m.merchantId, 'test')));
  expect(new Set(made).size).toBe(1);
  expect(parseKey(made[0])).toMatchObject({ kind: 'pk', mode: 'test' });
  expect(await keys.forMerchant(m.merchantId, 'test')).toBe(made[0]);
  const live = await keys.forMerchant(m.merchantId, 'live');
  expect(parseKey(live)).toMatchObject({ kind: 'pk', mode: 'live' });
  expect(await stored(m.merchantId)).toHaveLength(2);
});

it('keeps the key only encrypted, bound to its merchant, mode and key id', async () => {
  const m = await buildMerchant(stack.db);
  const key = await keys.forMerchant(m.merchantId, 'test');
  const [row] = await stored(m.merchantId);
  expect(row.key_ciphertext).not.toContain(parseKey(key)!.secret);
  const cipher = (stack.deps.webhooks ?? webhookRuntime(stack.settings)).cipher;
  expect(() => cipher.decrypt(row.key_ciphertext, row.key_id)).toThrow();
  const other = await buildMerchant(stack.db);
  await stack.db('hosted_page_keys').insert({ ...row, merchant_id: other.merchantId });
  await expect(keys.forMerchant(other.merchantId, 'test')).rejects.toThrow();
});

it('is a publishable key the public routes accept for the merchant’s sessions', async () => {
  const m = await buildMerchant(stack.db);
  const s = await createSession(stack, m.secretKey, payableBody());
  const res = await shopper(stack, await keys.forMerchant(m.merchantId, 'test'))('GET', `/sessions/${s.code}`);
  expect(res.status).toBe(200);
  expect(res.body.code).toBe(s.code);
});

it('is replaced on the next use after the operator revokes it', async () => {
  const m = await buildMerchant(stack.db);
  const first = await keys.forMerchant(m.merchantId, 'test');
  await revokeCheckoutKey(stack.db, parseKey(first)!.keyId);
  const second = await keys.forMerchant(m.merchantId, 'test');
  expect(second).not.toBe(first);
  const s = await createSession(stack, m.secretKey, payableBody());
  expect((await shopper(stack, first)('GET', `/sessions/${s.code}`)).status).toBe(401);
  expect((await shopper(stack, second)('GET', `/sessions/${s.code}`)).status).toBe(200);
  expect(await stored(m.merchantId)).toHaveLength(1);
});

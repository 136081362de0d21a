import { newSigningSecret, signatureHeader } from '../../src/webhooks/sign';
import { signTestHeader, verify, WebhookVerificationError } from '../../src/webhooks/verify';

/** The merchant-copyable verifier, against the sender's own signer: one test per failure mode. */
const secret = newSigningSecret();
const body = JSON.stringify({
  id: 'evt_test_1',
  object: 'event',
  type: 'checkout.session.completed',
  livemode: false,
  created_at: '2026-11-21T10:00:00.000Z',
  data: { object: { id: 'cs_test_1', amount: 45000 } },
});
const nowMs = 1_800_000_000_000;
const now = () => nowMs;
const t = nowMs / 1000;

function refusal(run: () => unknown): string {
  try {
    run();
  } catch (err) {
    expect(err).toBeInstanceOf(WebhookVerificationError);
    return (err as Error).message;
  }
  throw new Error('verify accepted the request');
}

it('accepts the sender’s signature over the raw body and returns the parsed event', () => {
  const event = verify(body, signatureHeader(body, [secret], t), [secret], 300, now);
  expect(event.id).toBe('evt_test_1');
  expect(event.data.object).toEqual({ id: 'cs_test_1', amount: 45000 });
  expect(verify(Buffer.from(body), signatureHeader(body, [secret], t), secret, 300, now).type).toBe(
    'checkout.session.completed',
  );
});

it('accepts either secret during a rotation, whichever v1 matches', () => {
  const previous = newSigningSecret();
  const header = signatureHeader(body, [secret, previous], t);
  expect(header.match(/v1=/g)).toHaveLength(2);
  expect(verify(body, header, [secret], 300, now).id).toBe('evt_test_1');
  expect(verify(body, header, [previous], 300, now).id).toBe('evt_test_1');
});

it('matches the test signer to the sender', () => {
  expect(signTestHeader(body, secret, t)).toBe(signatureHeader(body, [secret], t));
});

it('refuses a parsed body and says to verify the raw bytes', () => {
  const message = refusal(() => verify(JSON.parse(body), signatureHeader(body, [secret], t), [secret], 300, now));
  expect(message).toMatch(/raw request bytes/);
});

it('refuses a body that was re-serialised and names that mistake', () => {
  const reserialised = JSON.stringify(JSON.parse(body), null, 2);
  const message = refusal(() => verify(reserialised, signatureHeader(body, [secret], t), [secret], 300, now));
  expect(message).toMatch(/parsed and re-serialised/);
});

it('refuses a missing header', () => {
  expect(refusal(() => verify(body, undefined, [secret], 300, now))).toMatch(/No Svc-Signature header/);
});

it('refuses several Svc-Signature headers', () => {
  const header = signatureHeader(body, [secret], t);
  expect(refusal(() => verify(body, [header, header], [secret], 300, now))).toMatch(/More than one/);
});

it('refuses a malformed header', () => {
  for (const header of ['v1=abc', `t=${t}`, `t=soon,v1=${'0'.repeat(64)}`, 'garbage']) {
    expect(refusal(() => verify(body, header, [secret], 300, now))).toMatch(/malformed/);
  }
});

it('refuses when no secret is given', () => {
  expect(refusal(() => verify(body, signatureHeader(body, [secret], t), [], 300, now))).toMatch(/No signing secret/);
});

it('refuses the wrong secret', () => {
  const header = signatureHeader(body, [newSigningSecret()], t);
  expect(refusal(() => verify(body, header, [secret], 300, now))).toMatch(/No signature matches/);
});

it('hints when the secret is not a whsec_ secret', () => {
  const header = signatureHeader(body, [secret], t);
  expect(refusal(() => verify(body, header, ['svc_ck_test_x'], 300, now))).toMatch(/does not start with whsec_/);
});

it('refuses a timestamp changed after signing (the signature covers it)', () => {
  const header = signatureHeader(body, [secret], t).replace(`t=${t}`, `t=${t + 1}`);
  expect(refusal(() => verify(body, header, [secret], 300, now))).toMatch(/No signature matches/);
});

it('refuses a timestamp more than the tolerance away, in either direction', () => {
  expect(verify(body, signatureHeader(body, [secret], t - 300), [secret], 300, now).id).toBe('evt_test_1');
  expect(refusal(() => verify(body, signatureHeader(body, [secret], t - 301), [secret], 300, now))).toMatch(
    /301 s away/,
  );
  expect(refusal(() => verify(body, signatureHeader(body, [secret], t + 301), [secret], 300, now))).toMatch(
    /tolerance 300 s/,
  );
});

it('uses a tolerance of 300 seconds by default', () => {
  const old = signatureHeader(body, [secret], Math.floor(Date.now() / 1000) - 301);
  expect(refusal(() => verify(body, old, [secret]))).toMatch(/tolerance 300 s/);
});

it('ignores unknown signature schemes beside v1', () => {
  const header = `${signatureHeader(body, [secret], t)},v0=${'a'.repeat(64)}`;
  expect(verify(body, header, [secret], 300, now).id).toBe('evt_test_1');
});

it('refuses a signed body that is not JSON', () => {
  expect(refusal(() => verify('not json', signatureHeader('not json', [secret], t), [secret], 300, now))).toMatch(
    /not JSON/,
  );
});

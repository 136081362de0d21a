import { randomString } from '../../src/lib/ids';
import { buildMerchant } from './factories';
import { call } from './http';
import { HttpsReceiver, RECEIVER_HOST, startHttpsReceiver } from './https-receiver';
import { startStack, type Stack, type StackOptions } from './stack';

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

/** Polls `read` every 50 ms (real time: activities do not skip) until `ok` holds; returns that value. */
export async function until<T>(read: () => Promise<T>, ok: (value: T) => boolean, what: string, timeoutMs = 20_000) {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const value = await read();
    if (ok(value)) return value;
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}: ${JSON.stringify(value)}`);
    await sleep(50);
  }
}

/**
 * The webhook test files' shared steps, on the file's stack (read when called, since the stack
 * starts in `beforeAll`).
 */
export function webhookSteps(stackOf: () => Stack) {
  return {
    /** A merchant (with a contact e-mail of its own) whose events the stack's dispatcher fans out. */
    async webhookMerchant() {
      const contactEmail = `ops-${randomString(8).toLowerCase()}@shop.example.com`;
      const m = await buildMerchant(stackOf().db, { contactEmail });
      stackOf().dispatchEventsOf(m.merchantId);
      return { ...m, contactEmail };
    },

    /** Registers a test-mode endpoint for every event unless `body` says otherwise (201 expected). */
    async createEndpoint(key: string, url: string, body: Record<string, unknown> = {}) {
      const res = await call(stackOf().baseUrl, 'POST', '/v1/webhook_endpoints', {
        key,
        idempotencyKey: `idem_${randomString(16)}`,
        body: { url, events: ['*'], mode: 'test', ...body },
      });
      if (res.status !== 201) throw new Error(`create endpoint answered ${res.status}: ${res.text}`);
      return res.body as { id: string; secret: string; url: string };
    },

    /** `POST /webhook_endpoints/{id}/test` (202 expected); returns the event id. */
    async sendTest(key: string, endpointId: string, type = 'checkout.session.completed'): Promise<string> {
      const res = await call(stackOf().baseUrl, 'POST', `/v1/webhook_endpoints/${endpointId}/test`, {
        key,
        body: { type },
      });
      if (res.status !== 202) throw new Error(`test answered ${res.status}: ${res.text}`);
      return res.body.event_id;
    },
  };
}

/**
 * A test file's stack delivering to a real HTTPS receiver (its host allowed, its certificate
 * trusted): started in `beforeAll`, stopped in `afterAll`; read the fields inside tests. `options`
 * as startStack's (`publicHost: 'localhost'` for passkeys).
 */
export function useWebhookStack(options: StackOptions = {}): { stack: Stack; receiver: HttpsReceiver } {
  const env = {} as { stack: Stack; receiver: HttpsReceiver };
  beforeAll(async () => {
    env.receiver = await startHttpsReceiver();
    env.stack = await startStack(
      { WEBHOOK_ALLOWED_HOSTS: RECEIVER_HOST, WEBHOOK_EXTRA_CA_PATH: env.receiver.caPath },
      options,
    );
  });
  afterAll(async () => {
    await env.stack.stop();
    await env.receiver.close();
  });
  return env;
}

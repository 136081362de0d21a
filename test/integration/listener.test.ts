import { mkdtempSync, rmSync } from 'node:fs';
import { createServer, type IncomingHttpHeaders, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { Webhook } from 'standardwebhooks';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { listen } from '../../src/listener/listen';
import { verify } from '../../src/webhooks/verify';
import { createSession, sessionBody, until } from '../helpers/checkout-payments';
import { buildMerchant } from '../helpers/factories';
import { call } from '../helpers/http';
import { startStack, Stack } from '../helpers/stack';

/**
 * `npm run listen`: the merchant's events, followed through `GET /v1/events?direction=oldest_first`, reach a
 * local URL signed like real deliveries; a failed forward is retried; a stop and restart loses
 * and repeats nothing.
 */
jest.setTimeout(120_000);

let stack: Stack;
let dir: string;
beforeAll(async () => {
  stack = await startStack();
  dir = mkdtempSync(join(tmpdir(), 'listen-test-'));
});
afterAll(async () => {
  await stack.stop();
  rmSync(dir, { recursive: true, force: true });
});

interface Received {
  headers: IncomingHttpHeaders;
  body: string;
}

/** A local receiver: records every POST and answers `failures` of them with 500 first. */
async function receiver() {
  const received: Received[] = [];
  let failures = 0;
  const server: Server = createServer((req, res) => {
    const chunks: Buffer[] = [];
    req.on('data', (c: Buffer) => chunks.push(c));
    req.on('end', () => {
      received.push({ headers: req.headers, body: Buffer.concat(chunks).toString('utf8') });
      res.statusCode = failures > 0 ? 500 : 200;
      if (failures > 0) failures--;
      res.end();
    });
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  return {
    url: `http://127.0.0.1:${(server.address() as AddressInfo).port}/webhooks`,
    received,
    ids: () => received.map((r) => r.headers['svc-event-id']),
    failNext: (n: number) => (failures = n),
    close: () => new Promise((resolve) => server.close(resolve)),
  };
}

type Merchant = Awaited<ReturnType<typeof buildMerchant>>;

/** Expires a new session: one checkout.session.expired event; resolves with its id once recorded. */
async function expiredEvent(m: Merchant): Promise<string> {
  const session = await createSession(stack, m.secretKey, sessionBody());
  expect(
    (await call(stack.baseUrl, 'POST', `/v1/checkout/sessions/${session.id}/expire`, { key: m.secretKey })).status,
  ).toBe(200);
  let id: string | undefined;
  await until(async () => {
    const res = await call(stack.baseUrl, 'GET', '/v1/events?type=checkout.session.expired&limit=100', {
      key: m.secretKey,
    });
    id = res.body.data.find((e: { data: { object: { id: string } } }) => e.data.object.id === session.id)?.id;
    return id !== undefined;
  }, `the expired event of ${session.id}`);
  return id!;
}

function start(m: Merchant, forwardTo: string, statePath: string) {
  const controller = new AbortController();
  const lines: string[] = [];
  const done = listen({
    api: stack.baseUrl,
    key: m.secretKey,
    forwardTo,
    events: [],
    statePath,
    signal: controller.signal,
    log: (line) => lines.push(line),
    pollMs: 100,
    retryMs: [200],
  });
  return {
    lines,
    secret: () => /whsec_\w+/.exec(lines.join('\n'))?.[0],
    stop: async () => {
      controller.abort();
      await done;
    },
  };
}

it('forwards each new event, signed with the printed secret like a real delivery (events from before its first start are not sent)', async () => {
  const m = await buildMerchant(stack.db);
  const before = await expiredEvent(m);
  const r = await receiver();
  const l = start(m, r.url, join(dir, 'forward.json'));
  try {
    await until(async () => l.secret() !== undefined, 'the listener to start');
    const event = await expiredEvent(m);
    await until(async () => r.ids().includes(event), 'the event to be forwarded');
    const [got] = r.received;
    expect(got.headers['content-type']).toBe('application/json');
    expect(got.headers['svc-event-type']).toBe('checkout.session.expired');
    const verified = verify(got.body, got.headers['svc-signature'], l.secret()!);
    expect(got.headers['webhook-id']).toBe(event);
    expect(new Webhook(l.secret()!).verify(got.body, got.headers as Record<string, string>)).toEqual(verified);
    expect(verified).toMatchObject({ id: event, object: 'event', type: 'checkout.session.expired', livemode: false });
    expect(r.ids()).not.toContain(before);
    await until(
      async () => l.lines.some((line) => line.includes(`checkout.session.expired  ${event}  -> 200`)),
      'the line printed for it',
    );
  } finally {
    await l.stop();
    await r.close();
  }
});

it('retries a failed forward until the receiver takes it, keeping the order', async () => {
  const m = await buildMerchant(stack.db);
  const r = await receiver();
  const l = start(m, r.url, join(dir, 'retry.json'));
  try {
    await until(async () => l.secret() !== undefined, 'the listener to start');
    r.failNext(2);
    const first = await expiredEvent(m);
    const second = await expiredEvent(m);
    await until(async () => r.ids().includes(second), 'both events to be forwarded');
    expect(r.ids()).toEqual([first, first, first, second]);
    expect(l.lines.filter((line) => line.includes(`${first}  -> 500, retry`))).toHaveLength(2);
  } finally {
    await l.stop();
    await r.close();
  }
});

it('resumes after a clean stop from its saved place: what happened meanwhile is forwarded once, nothing twice', async () => {
  const m = await buildMerchant(stack.db);
  const r = await receiver();
  const state = join(dir, 'resume.json');
  const first = start(m, r.url, state);
  await until(async () => first.secret() !== undefined, 'the listener to start');
  const a = await expiredEvent(m);
  await until(async () => r.ids().includes(a), 'the first event');
  await first.stop();

  const [b, c] = [await expiredEvent(m), await expiredEvent(m)];
  const second = start(m, r.url, state);
  try {
    await until(async () => r.ids().includes(c), 'the events from while it was stopped');
    await new Promise((resolve) => setTimeout(resolve, 500)); // a few more polls: nothing else may arrive
    expect(r.ids()).toEqual([a, b, c]);
    expect(second.secret()).toBe(first.secret());
  } finally {
    await second.stop();
    await r.close();
  }
});

import { recordEvent } from '../../src/checkout/events';
import { newId, randomString } from '../../src/lib/ids';
import { call } from '../helpers/http';
import type { Reply } from '../helpers/https-receiver';
import { until, useWebhookStack, webhookSteps } from '../helpers/webhooks';

/**
 * What the endpoint answered, per attempt (`duration_ms`, `response_body` in `GET /v1/events/{id}`),
 * and `GET /v1/events?delivery_success=…`, against the real HTTPS receiver.
 */
const env = useWebhookStack();
const { webhookMerchant, createEndpoint, sendTest } = webhookSteps(() => env.stack);

const path = () => `/hook-${randomString(10)}`;
const deliveries = async (key: string, id: string) =>
  (await call(env.stack.baseUrl, 'GET', `/v1/events/${id}`, { key })).body.deliveries as any[];

/** The first attempt of a test event sent to an endpoint that answers `reply`. */
async function answeredWith(reply: Reply) {
  const m = await webhookMerchant();
  const p = path();
  env.receiver.respond = (r) => (r.path === p ? reply : { status: 200 });
  const endpoint = await createEndpoint(m.secretKey, env.receiver.url(p));
  const eventId = await sendTest(m.secretKey, endpoint.id);
  const [row] = await until(
    () => deliveries(m.secretKey, eventId),
    (d) => d.length >= 1,
    'the first attempt',
  );
  return row;
}

describe('what the endpoint answered', () => {
  it('keeps a delivered attempt’s answer and how long it took', async () => {
    const row = await answeredWith({ status: 200, body: '{"received":true}', delayMs: 150 });
    expect(row).toMatchObject({ status_code: 200, error: null, response_body: '{"received":true}' });
    expect(row.duration_ms).toBeGreaterThanOrEqual(150);
    expect(row.duration_ms).toBeLessThan(10_000);
  });

  it('keeps a failed attempt’s answer, control characters other than tab and newline removed', async () => {
    const row = await answeredWith({ status: 500, body: 'order service down\r\n\u0007retry\tlater\u0000' });
    expect(row).toMatchObject({
      status_code: 500,
      error: 'http_500',
      response_body: 'order service down\nretry\tlater',
      duration_ms: expect.any(Number),
    });
  });

  it('shows a binary answer as UTF-8 with each invalid byte replaced', async () => {
    const png = Buffer.from([0x89, 0x50, 0x4e, 0x47, 0x0d, 0x0a, 0x1a, 0x0a, 0x00, 0x00, 0xff]);
    const row = await answeredWith({ status: 200, body: png, headers: { 'content-type': 'image/png' } });
    expect(row.response_body).toBe('\ufffdPNG\n\n\ufffd');
  });

  it('keeps only the first 1 KB of an oversized answer, cut on a character boundary', async () => {
    const body = `${'a'.repeat(1023)}é${'b'.repeat(100_000)}`; // é takes bytes 1,024 and 1,025
    const row = await answeredWith({ status: 502, body });
    expect(row).toMatchObject({ status_code: 502, error: 'http_502', response_body: 'a'.repeat(1023) });
  });
});

describe('delivery_success', () => {
  it('lists the events an endpoint has not received after a failure, paged by cursor, until a delivery succeeds', async () => {
    const m = await webhookMerchant();
    const [failingPath, healthyPath] = [path(), path()];
    let failing = true;
    env.receiver.respond = (r) => (r.path === failingPath && failing ? { status: 503, body: 'down' } : { status: 200 });
    const broken = await createEndpoint(m.secretKey, env.receiver.url(failingPath));
    const healthy = await createEndpoint(m.secretKey, env.receiver.url(healthyPath));
    const onlyHealthy = await sendTest(m.secretKey, healthy.id);
    const events: string[] = [];
    for (let i = 0; i < 5; i++) {
      const event = await env.stack.db.transaction((trx) =>
        recordEvent(trx, {
          merchantId: m.merchantId,
          mode: 'test',
          type: 'checkout.session.completed',
          object: { id: newId('cs', 'test'), object: 'checkout.session' },
          now: new Date(env.stack.clock().getTime() + i),
        }),
      );
      events.push(event.id);
    }
    for (const id of [...events, onlyHealthy]) {
      await until(
        () => deliveries(m.secretKey, id),
        (d) => d.length >= (id === onlyHealthy ? 1 : 2),
        `the attempts of ${id}`,
      );
    }
    const list = async (query: string) => {
      const res = await call(env.stack.baseUrl, 'GET', `/v1/events?${query}`, { key: m.secretKey });
      expect(res.status).toBe(200);
      return res.body as { data: Array<{ id: string }>; next_cursor: string | null };
    };
    const pages = async (query: string) => {
      const ids: string[][] = [];
      let cursor: string | null = null;
      do {
        const page = await list(`${query}${cursor ? `&cursor=${cursor}` : ''}`);
        ids.push(page.data.map((e) => e.id));
        cursor = page.next_cursor;
      } while (cursor);
      return ids;
    };
    const newest = [...events].reverse();
    expect(await pages('delivery_success=false&limit=2')).toEqual([
      newest.slice(0, 2),
      newest.slice(2, 4),
      [events[0]],
    ]);
    expect(await pages('delivery_success=false&limit=2&direction=oldest_first')).toEqual([
      events.slice(0, 2),
      events.slice(2, 4),
      [events[4]],
    ]);
    expect((await list('delivery_success=true')).data.map((e) => e.id)).toEqual([onlyHealthy]);
    expect((await list('delivery_success=false&type=refund.succeeded')).data).toEqual([]);

    failing = false;
    const redelivered = await call(env.stack.baseUrl, 'POST', `/v1/events/${events[2]}/redeliver`, {
      key: m.secretKey,
    });
    expect(redelivered.status).toBe(202);
    await until(
      () => deliveries(m.secretKey, events[2]),
      (d) => d.some((row) => row.endpoint_id === broken.id && row.error === null),
      'the redelivery to the repaired endpoint',
    );
    expect(await pages('delivery_success=false&limit=2')).toEqual([newest.slice(0, 2), [events[1], events[0]]]);
    expect((await list('delivery_success=true')).data.map((e) => e.id)).toEqual([events[2], onlyHealthy]);
  });

  it('refuses a value other than true or false', async () => {
    const m = await webhookMerchant();
    const res = await call(env.stack.baseUrl, 'GET', '/v1/events?delivery_success=yes', { key: m.secretKey });
    expect(res.status).toBe(400);
    expect(res.body.error.code).toBe('validation_error');
  });
});

import { readFileSync } from 'node:fs';
import { DELIVERY_TIMEOUT_MS } from '../../src/webhooks/schedule';
import { deliveryAgent, postWebhook } from '../../src/webhooks/send';
import { webhookHeaders } from '../../src/webhooks/sign';
import { runClosedLoop } from './measure';

/**
 * The webhook benchmark's floor, run as a process of its own as the worker is: COUNT signed POSTs
 * of one event body to URL, CONCURRENCY at once, through the same agent, signing and POST code as
 * the delivery activity (`src/webhooks/send.ts`). Arguments: URL COUNT CONCURRENCY SECRET CA_PATH.
 * Exits 1 on the first failed POST.
 */
async function main(): Promise<void> {
  const [url, count, concurrency, secret, caPath] = process.argv.slice(2);
  const target = new URL(url);
  const agent = deliveryAgent([readFileSync(caPath, 'utf8')]);
  const body = JSON.stringify({ id: 'evt_test_floor', object: 'event', type: 'checkout.session.completed' });
  await runClosedLoop(Number(count), Number(concurrency), async (i) => {
    const event = { id: `floor-${i}`, type: 'checkout.session.completed' };
    const headers = webhookHeaders(event, body, [secret], Math.floor(Date.now() / 1000));
    const result = await postWebhook(
      { url: target, host: target.hostname, address: target.hostname, family: 4 },
      body,
      headers,
      { agent, timeoutMs: DELIVERY_TIMEOUT_MS },
    );
    if (result.error) throw new Error(`floor POST failed: ${result.error}`);
  });
  agent.destroy();
}

main().catch((err) => {
  process.stderr.write(`${err instanceof Error ? err.message : String(err)}\n`);
  process.exit(1);
});

import { readFileSync } from 'node:fs';
import { eventOut } from '../../src/checkout/events';
import { createDb } from '../../src/db/knex';
import type { KeyMode } from '../../src/keys/keys';
import { newId } from '../../src/lib/ids';
import { DELIVERY_TIMEOUT_MS } from '../../src/webhooks/schedule';
import { deliveryAgent, postWebhook, SendResult } from '../../src/webhooks/send';
import { webhookHeaders } from '../../src/webhooks/sign';
import { runClosedLoop } from './measure';

/**
 * The webhook benchmark's durable floor, run as a process of its own: the irreducible durable work
 * of a delivery done by hand, with no Temporal, on the same schema (`events`, `webhook_queue`,
 * `event_deliveries`). PRODUCERS transactions commit EVENTS events, each with its ENDPOINTS queue
 * rows in one statement; one loop per endpoint claims due rows in batches (`UPDATE … FOR UPDATE
 * SKIP LOCKED … RETURNING`, joined to the events) with up to IN_FLIGHT POSTs in flight, sends each
 * signed through the delivery agent and POST code of the worker, and one recorder writes the
 * finished attempts in batches (the attempt rows and the queue rows, one transaction per batch).
 * Producers and consumers share this process, so a consumer hears of new rows without NOTIFY.
 * Arguments: DATABASE_URL MERCHANT_ID URL_BASE EVENTS ENDPOINTS IN_FLIGHT PRODUCERS POOL SECRET
 * CA_PATH. Endpoint i is `<URL_BASE>/durable-floor-<i>`. Prints one JSON line: `startedAt` (before
 * the first commit), `recordedAt`, `delivered`. Exits 1 on a failed POST.
 */

/** Claimed rows, with the event each one sends. */
interface Claimed {
  event_id: string;
  generation: string;
  attempt_no: number;
  type: string;
  merchant_id: string;
  mode: KeyMode;
  data_object: unknown;
  created_at: Date;
}

async function main(): Promise<void> {
  const [databaseUrl, merchantId, urlBase, events, endpointCount, inFlight, producers, pool, secret, caPath] =
    process.argv.slice(2);
  const EVENTS = Number(events);
  const IN_FLIGHT = Number(inFlight);
  const db = createDb(databaseUrl, Number(pool));
  const agent = deliveryAgent([readFileSync(caPath, 'utf8')]);
  const endpoints = Array.from({ length: Number(endpointCount) }, (_, i) => {
    const url = new URL(`${urlBase}/durable-floor-${i}`);
    return { id: `we_floor_${i}`, target: { url, host: url.hostname, address: url.hostname, family: 4 as const } };
  });
  const total = EVENTS * endpoints.length;
  const claimBatch = `floor-${process.pid}`;

  /** Rings every consumer: new rows were committed, or a POST finished. */
  const waiting = new Set<() => void>();
  const ring = () => {
    for (const wake of [...waiting]) wake();
    waiting.clear();
  };
  // Rung, or 10 ms at most (a ring between a consumer's empty claim and its wait is not lost).
  const nextRing = () =>
    new Promise<void>((resolve) => {
      const timer = setTimeout(resolve, 10);
      waiting.add(() => {
        clearTimeout(timer);
        resolve();
      });
    });

  const done: Array<{ endpointId: string; row: Claimed; result: SendResult }> = [];
  let recorded = 0;
  let resent = 0;
  let failure: unknown;
  let recording: Promise<void> | undefined;
  /** Records what finished so far, one transaction per pass, until nothing is left. */
  const record = async () => {
    while (done.length > 0) {
      const batch = done.splice(0);
      await db.transaction(async (trx) => {
        await trx.raw(
          `INSERT INTO event_deliveries (event_id, endpoint_id, generation, attempt_no, status_code, error,
                                         delivered_at, duration_ms, response_body)
           SELECT d.event_id, d.endpoint_id, d.generation, d.attempt_no, d.status_code, d.error, now(),
                  d.duration_ms, d.response_body
             FROM unnest(?::text[], ?::text[], ?::bigint[], ?::int[], ?::int[], ?::text[], ?::int[], ?::text[])
               AS d(event_id, endpoint_id, generation, attempt_no, status_code, error, duration_ms, response_body)
           ON CONFLICT DO NOTHING`,
          [
            batch.map((b) => b.row.event_id),
            batch.map((b) => b.endpointId),
            batch.map((b) => b.row.generation),
            batch.map((b) => b.row.attempt_no),
            batch.map((b) => b.result.statusCode) as unknown as string[], // nulls bind as SQL NULL
            batch.map((b) => b.result.error) as unknown as string[], // nulls bind as SQL NULL
            batch.map((b) => b.result.durationMs),
            batch.map((b) => b.result.responseBody) as unknown as string[], // nulls bind as SQL NULL
          ],
        );
        await trx.raw(
          `DELETE FROM webhook_queue q USING unnest(?::text[], ?::text[], ?::bigint[]) AS d(event_id, endpoint_id, generation)
            WHERE q.event_id = d.event_id AND q.endpoint_id = d.endpoint_id AND q.generation = d.generation`,
          [batch.map((b) => b.row.event_id), batch.map((b) => b.endpointId), batch.map((b) => b.row.generation)],
        );
      });
      recorded += batch.length;
    }
  };
  const recordSoon = () => {
    recording ??= record()
      .catch((err: unknown) => void (failure ??= err))
      .finally(() => {
        recording = undefined;
        if (done.length > 0) recordSoon();
        ring();
      });
  };

  /** One endpoint's loop: claims as half its slots are free, POSTs each row at once. */
  const consume = async (endpoint: (typeof endpoints)[number]) => {
    let sending = 0;
    let claimedTotal = 0;
    while (claimedTotal < EVENTS && failure === undefined) {
      const free = sending === 0 || IN_FLIGHT - sending >= Math.ceil(IN_FLIGHT / 2) ? IN_FLIGHT - sending : 0;
      if (free > 0) {
        const { rows } = (await db.raw(
          `WITH due AS (
             SELECT ctid FROM webhook_queue
              WHERE endpoint_id = ? AND next_attempt_at <= now()
              ORDER BY next_attempt_at LIMIT ? FOR UPDATE SKIP LOCKED
           ), claimed AS (
             UPDATE webhook_queue q SET claim = ?, next_attempt_at = now() + interval '2 minutes'
              WHERE q.ctid = ANY (ARRAY(SELECT ctid FROM due))
             RETURNING q.event_id, q.generation, q.attempt_no
           )
           SELECT c.event_id, c.generation, c.attempt_no, e.type, e.merchant_id, e.mode, e.data_object, e.created_at
             FROM claimed c JOIN events e ON e.id = c.event_id`,
          [endpoint.id, free, claimBatch],
        )) as { rows: Claimed[] };
        claimedTotal += rows.length;
        for (const row of rows) {
          sending++;
          const body = JSON.stringify(eventOut({ ...row, id: row.event_id })); // the body the worker sends
          const headers = webhookHeaders(
            { id: row.event_id, type: row.type },
            body,
            [secret],
            Math.floor(Date.now() / 1000),
          );
          const post = () => postWebhook(endpoint.target, body, headers, { agent, timeoutMs: DELIVERY_TIMEOUT_MS });
          // A pooled socket the receiver closed as it was reused answers with a reset: sent again
          // at once (our pipeline records it and retries), counted; any other failure ends the run.
          void post()
            .then(async (first) => {
              if (first.error !== 'connection_reset') return first;
              resent++;
              return post();
            })
            .then((result) => {
              sending--;
              if (result.error) failure ??= new Error(`durable floor POST failed: ${result.error}`);
              done.push({ endpointId: endpoint.id, row, result });
              recordSoon();
              ring();
            });
        }
        if (rows.length > 0) continue;
      }
      await nextRing();
    }
  };

  const startedAt = Date.now();
  const consumers = Promise.all(endpoints.map(consume));
  await runClosedLoop(EVENTS, Number(producers), async () => {
    await db.raw(
      `WITH e AS (
         INSERT INTO events (id, merchant_id, mode, type, data_object, created_at, dispatched_at)
         VALUES (?, ?, 'test', 'checkout.session.completed', ?::jsonb, now(), now())
         RETURNING id
       )
       INSERT INTO webhook_queue (event_id, endpoint_id, generation, next_attempt_at)
       SELECT e.id, ep, 0, now() FROM e, unnest(?::text[]) AS ep`,
      [
        newId('evt', 'test'),
        merchantId,
        JSON.stringify({ id: newId('cs', 'test'), object: 'checkout.session', amount: 45000, currency: 'IQD' }),
        endpoints.map((e) => e.id),
      ],
    );
    ring();
  });
  await consumers;
  while (recorded < total && failure === undefined) await nextRing();
  if (failure !== undefined) throw failure;
  process.stdout.write(`${JSON.stringify({ startedAt, recordedAt: Date.now(), delivered: recorded, resent })}\n`);
  agent.destroy();
  await db.destroy();
}

main().catch((err) => {
  process.stderr.write(`${err instanceof Error ? err.message : String(err)}\n`);
  process.exit(1);
});

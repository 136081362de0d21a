/** An attempt's outcome as server-sent events: the poll's answer pushed each time it changes, until it is final. */
import { PassThrough } from 'node:stream';
import type { Context } from 'koa';
import { log } from '../../lib/log';
import { attemptStreamsOpen } from '../../telemetry/checkout';
import type { AttemptStreamHub } from './attempt-stream-hub';
import { attemptStreamRules } from './attempt-stream-rules';

/** What a stream sends: the poll's answer, whose `status` says whether the attempt is final. */
export interface StreamedAttempt {
  attempt_id: string;
  status: string;
}

const frame = (event: string, data: unknown) => `event: ${event}\ndata: ${JSON.stringify(data)}\n\n`;

/**
 * Answers `ctx` with an event stream of the attempt `read` returns: an `attempt` event with the
 * poll's answer at once and at every change of its status; after a final one (not `pending`) the
 * stream ends. A `reconnect` event ends it early (its life is over, or the process is stopping):
 * the client opens a new stream. The first read happens before anything is sent, so a refusal
 * (`404 attempt_not_found`) is the poll's error envelope. A later read that fails (a pool busy with
 * a burst of wakes) leaves the stream open for the hub's backstop, which reads it again while its
 * attempt's status differs from the one sent; `readFailuresToEnd` failures in a row end the stream
 * without an event (the page falls back to polling).
 */
export async function streamAttempt<T extends StreamedAttempt>(
  ctx: Context,
  hub: AttemptStreamHub,
  read: () => Promise<T>,
): Promise<void> {
  const first = await read();
  ctx.status = 200;
  ctx.type = 'text/event-stream';
  ctx.set('Cache-Control', 'no-store');
  ctx.set('X-Accel-Buffering', 'no');
  const out = new PassThrough();
  ctx.body = out;
  ctx.req.socket?.setTimeout(0);
  ctx.req.socket?.setNoDelay(true);
  out.write(`retry: ${attemptStreamRules.clientRetryMs}\n\n`);
  out.write(frame('attempt', first));
  if (first.status !== 'pending') return void out.end();
  if (hub.stopping) return void out.end(frame('reconnect', {}));

  let sent = first.status;
  let reading = false;
  let again = false;
  let done = false;
  let failures = 0;
  attemptStreamsOpen.inc();
  // Wakes come from the hub, outside the request's async scope: the log lines name the request themselves.
  const logFields = { attempt_id: first.attempt_id, request_id: ctx.state.requestId as string | undefined };
  /** Writes unless the client has gone (a write to a closed stream would be an error). */
  const send = (text: string) => void (out.writable && out.write(text));
  const heartbeat = setInterval(() => send(': keep-alive\n\n'), attemptStreamRules.heartbeatMs);
  const deadline = setTimeout(() => end('reconnect'), attemptStreamRules.maxLifeMs);
  const unwatch = hub.watch({
    attemptId: first.attempt_id,
    status: () => sent,
    wake: () => void reread(),
    drain: () => end('reconnect'),
  });
  out.once('close', cleanup);

  /** One read at a time; a wake during a read makes it read once more. */
  async function reread(): Promise<void> {
    if (done) return;
    if (reading) return void (again = true);
    reading = true;
    try {
      do {
        again = false;
        const now = await read();
        failures = 0;
        if (done) return;
        if (now.status !== sent) {
          sent = now.status;
          send(frame('attempt', now));
        }
        if (now.status !== 'pending') return end(null);
      } while (again);
    } catch (err) {
      failures += 1;
      const ends = failures >= attemptStreamRules.readFailuresToEnd;
      log.warn(
        ends ? 'attempt stream read failed; the stream ends' : 'attempt stream read failed; the backstop reads again',
        {
          ...logFields,
          failures,
          error: err,
        },
      );
      if (ends) end(null);
    } finally {
      reading = false;
    }
  }

  function end(event: 'reconnect' | null): void {
    if (done) return;
    if (event) send(frame(event, {}));
    if (out.writable) out.end();
    cleanup();
  }

  function cleanup(): void {
    if (done) return;
    done = true;
    clearInterval(heartbeat);
    clearTimeout(deadline);
    unwatch();
    attemptStreamsOpen.dec();
  }
}

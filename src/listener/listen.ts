import { mkdirSync, readFileSync, renameSync, writeFileSync } from 'node:fs';
import { dirname } from 'node:path';
import { newSigningSecret, webhookHeaders } from '../webhooks/sign';

/**
 * The local webhook listener: follows a merchant's events through the Checkout API
 * (`GET /v1/events?direction=oldest_first`), signs each with a local secret with the same headers as
 * real deliveries (`Svc-Signature` and Standard Webhooks'), and POSTs it to a local URL. It keeps its place in a state file, saved after
 * every forwarded event, so a restart resumes where it stopped: nothing skipped, nothing forwarded
 * twice after a clean stop.
 */

export interface ListenOptions {
  /** The API's origin, e.g. http://localhost:3000. */
  api: string;
  /** A secret key with events:read. */
  key: string;
  forwardTo: string;
  /** Event types to forward (all when empty); the others are passed over. */
  events: string[];
  statePath: string;
  /** Stops the loop after the event being forwarded. */
  signal: AbortSignal;
  log: (line: string) => void;
  pollMs?: number;
  /** Retry delays of a failed forward, the last one repeating. */
  retryMs?: readonly number[];
}

/** Where the listener is: the newest created_at forwarded or passed, and the ids seen near it. */
export interface ListenState {
  secret: string;
  checkpoint: string | null;
  /** Event ids at or after `checkpoint - OVERLAP_MS`: a re-read of that window skips them. */
  seen: Array<{ id: string; created_at: string }>;
}

interface ApiEvent {
  id: string;
  type: string;
  created_at: string;
  [field: string]: unknown;
}

/**
 * Each poll re-reads this much before the checkpoint: an event whose transaction committed late
 * (its created_at is older than events already read) is still found, and `seen` keeps it single.
 */
export const OVERLAP_MS = 60_000;
const FORWARD_TIMEOUT_MS = 10_000;

export function loadState(path: string): ListenState {
  try {
    return JSON.parse(readFileSync(path, 'utf8')) as ListenState;
  } catch {
    return { secret: newSigningSecret(), checkpoint: null, seen: [] };
  }
}

/** Written to a temporary file and renamed, so a crash never leaves half a state file. */
function saveState(path: string, state: ListenState): void {
  mkdirSync(dirname(path), { recursive: true });
  writeFileSync(`${path}.tmp`, JSON.stringify(state));
  renameSync(`${path}.tmp`, path);
}

const sleep = (ms: number, signal: AbortSignal) =>
  new Promise<void>((resolve) => {
    if (signal.aborted) return resolve();
    const timer = setTimeout(resolve, ms);
    signal.addEventListener('abort', () => (clearTimeout(timer), resolve()), { once: true });
  });

async function apiGet<T>(opts: ListenOptions, path: string): Promise<T> {
  const res = await fetch(new URL(path, opts.api), { headers: { authorization: `Bearer ${opts.key}` } });
  const body = await res.text();
  if (!res.ok) throw new Error(`GET ${path} answered ${res.status}: ${body.slice(0, 300)}`);
  return JSON.parse(body) as T;
}

/** Every event from `since` on, oldest first, following `next_cursor`. */
async function eventsSince(opts: ListenOptions, since: string | null): Promise<ApiEvent[]> {
  const out: ApiEvent[] = [];
  let cursor: string | null = null;
  do {
    const query = new URLSearchParams({ direction: 'oldest_first', limit: '100' });
    if (since) query.set('since', since);
    if (cursor) query.set('cursor', cursor);
    const page: { data: ApiEvent[]; next_cursor: string | null } = await apiGet(opts, `/v1/events?${query}`);
    out.push(...page.data);
    cursor = page.next_cursor;
  } while (cursor && !opts.signal.aborted);
  return out;
}

/** On a first start, begin after the newest event that exists: only what happens from now on is forwarded. */
async function startingPoint(opts: ListenOptions, state: ListenState): Promise<void> {
  const newest: { data: ApiEvent[] } = await apiGet(opts, '/v1/events?limit=1');
  state.checkpoint = newest.data[0]?.created_at ?? null;
  if (state.checkpoint) {
    const from = new Date(Date.parse(state.checkpoint) - OVERLAP_MS).toISOString();
    state.seen = (await eventsSince(opts, from)).map(({ id, created_at }) => ({ id, created_at }));
  }
}

/** POSTs the event as a real delivery would be sent; true on a 2xx. */
async function forward(
  opts: ListenOptions,
  secret: string,
  event: ApiEvent,
): Promise<{ ok: boolean; outcome: string }> {
  const body = JSON.stringify({
    id: event.id,
    object: event.object,
    type: event.type,
    livemode: event.livemode,
    created_at: event.created_at,
    data: event.data,
  });
  try {
    const res = await fetch(opts.forwardTo, {
      method: 'POST',
      redirect: 'manual',
      signal: AbortSignal.timeout(FORWARD_TIMEOUT_MS),
      headers: webhookHeaders(event, body, [secret], Math.floor(Date.now() / 1000)),
      body,
    });
    await res.arrayBuffer();
    return { ok: res.status >= 200 && res.status < 300, outcome: String(res.status) };
  } catch (err) {
    return { ok: false, outcome: err instanceof Error && err.name === 'TimeoutError' ? 'timeout' : 'unreachable' };
  }
}

/** Marks `event` done: it joins `seen`, the checkpoint moves to it, and what fell out of the window is dropped. */
function advance(state: ListenState, event: ApiEvent): void {
  if (!state.checkpoint || event.created_at > state.checkpoint) state.checkpoint = event.created_at;
  state.seen.push({ id: event.id, created_at: event.created_at });
  const floor = new Date(Date.parse(state.checkpoint) - OVERLAP_MS).toISOString();
  state.seen = state.seen.filter((s) => s.created_at >= floor);
}

/** Runs until `opts.signal` aborts; resolves once the current event is done and the state is saved. */
export async function listen(opts: ListenOptions): Promise<void> {
  const state = loadState(opts.statePath);
  const retryMs = opts.retryMs ?? [1_000, 2_000, 5_000, 10_000, 30_000];
  if (state.checkpoint === null && state.seen.length === 0) await startingPoint(opts, state);
  saveState(opts.statePath, state);
  opts.log(`Forwarding ${opts.events.length ? opts.events.join(', ') : 'all events'} to ${opts.forwardTo}`);
  opts.log(`Signing secret (verify with it as with an endpoint's secret): ${state.secret}`);
  while (!opts.signal.aborted) {
    let events: ApiEvent[];
    try {
      const from = state.checkpoint ? new Date(Date.parse(state.checkpoint) - OVERLAP_MS).toISOString() : null;
      const seen = new Set(state.seen.map((s) => s.id));
      events = (await eventsSince(opts, from)).filter((e) => !seen.has(e.id));
    } catch (err) {
      opts.log(`events: ${err instanceof Error ? err.message : String(err)}; retrying`);
      await sleep(opts.pollMs ?? 1_000, opts.signal);
      continue;
    }
    for (const event of events) {
      if (opts.signal.aborted) break;
      if (opts.events.length === 0 || opts.events.includes(event.type)) {
        for (let attempt = 1; ; attempt++) {
          const result = await forward(opts, state.secret, event);
          opts.log(
            `${new Date().toISOString()}  ${event.type}  ${event.id}  -> ${result.outcome}${result.ok ? '' : `, retry ${attempt}`}`,
          );
          if (result.ok) break;
          await sleep(retryMs[Math.min(attempt - 1, retryMs.length - 1)], opts.signal);
          if (opts.signal.aborted) return saveState(opts.statePath, state); // not forwarded: the restart sends it
        }
      }
      advance(state, event);
      saveState(opts.statePath, state);
    }
    await sleep(opts.pollMs ?? 1_000, opts.signal);
  }
  saveState(opts.statePath, state);
}

/** A server-sent events client for tests: the events as they come, and when the server ended the stream. */

export interface StreamEvent {
  event: string;
  data: any;
}

export interface OpenStream {
  status: number;
  headers: Headers;
  /** Every event so far, in order (comment lines are counted, not listed). */
  events: StreamEvent[];
  comments: number;
  /** Resolves with the `n`th event (1-based), or rejects after `timeoutMs`. */
  nth(n: number, timeoutMs?: number): Promise<StreamEvent>;
  /** Resolves when the server has ended the stream (true), or after `timeoutMs` (false). */
  ended(timeoutMs?: number): Promise<boolean>;
  /** Closes the stream from the client's side. */
  close(): void;
}

/** Opens `url` as an event stream; a non-200 answer is returned with its JSON body and no events. */
export async function openStream(url: string, headers: Record<string, string>): Promise<OpenStream & { body?: any }> {
  const abort = new AbortController();
  const res = await fetch(url, { headers: { accept: 'text/event-stream', ...headers }, signal: abort.signal });
  const events: StreamEvent[] = [];
  let comments = 0;
  let wake: () => void = () => undefined;
  let isEnded = false;
  const changed = () => new Promise<void>((resolve) => (wake = resolve));

  const waitFor = async (holds: () => boolean, timeoutMs: number): Promise<boolean> => {
    const by = Date.now() + timeoutMs;
    while (!holds()) {
      const left = by - Date.now();
      if (left <= 0) return false;
      let timer: NodeJS.Timeout | undefined;
      await Promise.race([changed(), new Promise((r) => (timer = setTimeout(r, left)))]);
      clearTimeout(timer);
    }
    return true;
  };
  const stream: OpenStream = {
    status: res.status,
    headers: res.headers,
    events,
    get comments() {
      return comments;
    },
    async nth(n, timeoutMs = 10_000) {
      if (!(await waitFor(() => events.length >= n, timeoutMs))) {
        throw new Error(`no event ${n} within ${timeoutMs} ms (got ${JSON.stringify(events)})`);
      }
      return events[n - 1];
    },
    ended: (timeoutMs = 10_000) => waitFor(() => isEnded, timeoutMs),
    close: () => abort.abort(),
  };
  if (res.status !== 200 || !res.body) {
    const text = await res.text();
    return { ...stream, body: text ? JSON.parse(text) : undefined };
  }

  const reader = res.body.pipeThrough(new TextDecoderStream()).getReader();
  void (async () => {
    let buffer = '';
    try {
      for (;;) {
        const { done, value } = await reader.read();
        if (done) break;
        buffer += value;
        let end: number;
        while ((end = buffer.indexOf('\n\n')) >= 0) {
          const block = buffer.slice(0, end);
          buffer = buffer.slice(end + 2);
          const lines = block.split('\n');
          if (lines.every((l) => l.startsWith(':'))) comments += 1;
          const event = lines.find((l) => l.startsWith('event: '))?.slice(7);
          const data = lines.find((l) => l.startsWith('data: '))?.slice(6);
          if (event) events.push({ event, data: data === undefined ? undefined : JSON.parse(data) });
        }
        wake();
      }
    } catch {
      // Aborted by the client.
    }
    isEnded = true;
    wake();
  })();
  return stream;
}

import { performance } from 'node:perf_hooks';

/** What one measured batch gives: how many calls, the wall time, and each call's latency. */
export interface Batch {
  count: number;
  wallMs: number;
  latenciesMs: number[];
}

/**
 * Calls `op(i)` for i = 0 … count − 1 from `concurrency` loops that each take the next index as
 * soon as their call returns (a closed loop, as a client pool would); any failure stops the run.
 */
export async function runClosedLoop(
  count: number,
  concurrency: number,
  op: (i: number) => Promise<void>,
): Promise<Batch> {
  const latenciesMs: number[] = [];
  let next = 0;
  const started = performance.now();
  const loop = async () => {
    for (let i = next++; i < count; i = next++) {
      const t0 = performance.now();
      await op(i);
      latenciesMs.push(performance.now() - t0);
    }
  };
  await Promise.all(Array.from({ length: concurrency }, loop));
  return { count, wallMs: performance.now() - started, latenciesMs };
}

/** Several batches as one: counts, wall times and latencies added up. */
export function combine(batches: Batch[]): Batch {
  return {
    count: batches.reduce((n, b) => n + b.count, 0),
    wallMs: batches.reduce((n, b) => n + b.wallMs, 0),
    latenciesMs: batches.flatMap((b) => b.latenciesMs),
  };
}

export const perSecond = (b: Batch) => (b.count / b.wallMs) * 1000;

/** The nearest-rank percentile `p` (0–100) of `values`. */
export function percentile(values: number[], p: number): number {
  const sorted = [...values].sort((a, b) => a - b);
  return sorted[Math.min(sorted.length - 1, Math.max(0, Math.ceil((p / 100) * sorted.length) - 1))];
}

/** Rows as aligned columns; the first row is the header. */
export function table(rows: string[][]): string {
  const widths = rows[0].map((_, i) => Math.max(...rows.map((r) => r[i].length)));
  return rows
    .map((r) =>
      r
        .map((c, i) => c.padEnd(widths[i]))
        .join('  ')
        .trimEnd(),
    )
    .join('\n');
}

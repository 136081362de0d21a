import type { AddressInfo } from 'node:net';
import { Client as TemporalClient, Connection } from '@temporalio/client';
import type { Client as PgClient } from 'pg';
import { createApp } from '../../src/app';
import { loadSettings } from '../../src/config';
import { createDb, type Db } from '../../src/db/knex';
import { systemClock } from '../../src/lib/clock';
import type { BenchEnvironment } from './environment';

/**
 * Where a route's time goes in Postgres, so that a bench's miss explains itself: the route is run
 * once more through an in-process app (the API's own code and settings) whose knex records every
 * statement it sends, and each statement is then planned and run again under `EXPLAIN (ANALYZE,
 * BUFFERS)` inside a transaction that is rolled back.
 */

/** One statement a request sent, with what Postgres did with it. */
export interface StatementPlan {
  sql: string;
  executionMs: number;
  /** Postgres's planning of it (not in its execution time; grows with the statistics and partitions it reads). */
  planningMs: number;
  plan: string[];
}

/** A route's statements, in the order sent, planned. */
export interface RoutePlans {
  statements: StatementPlan[];
  /** The sum of the statements' execution times. */
  executionMs: number;
  /** The sum of their planning times. */
  planningMs: number;
}

interface Recorded {
  sql: string;
  bindings: readonly unknown[];
}

/** Statements worth a plan: reads and writes, not transaction control, SET or LISTEN. */
const PLANNABLE = /^\s*(select|with|insert|update|delete)\b/i;

/** An app in this process on `serviceEnv`'s settings, whose statements can be recorded around a call. */
export async function startPlanRecorder(
  bench: BenchEnvironment,
  serviceEnv: NodeJS.ProcessEnv,
): Promise<{ baseUrl: string; record(run: () => Promise<void>): Promise<Recorded[]> }> {
  const settings = loadSettings({ ...serviceEnv, LOG_LEVEL: 'silent' });
  const db: Db = createDb(bench.databaseUrl, 2);
  const connection = await Connection.connect({ address: bench.temporalAddress });
  const temporal = new TemporalClient({ connection, namespace: settings.TEMPORAL_NAMESPACE });
  const http = createApp({ db, settings, clock: systemClock, temporal }).listen(0, '127.0.0.1');
  await new Promise((resolve) => http.once('listening', resolve));
  bench.onClose(async () => {
    await new Promise((resolve) => http.close(resolve));
    await Promise.all([db.destroy(), connection.close()]);
  });

  let recording: Recorded[] | undefined;
  db.on('query', (q: { sql: string; bindings?: readonly unknown[] }) => {
    if (recording && PLANNABLE.test(q.sql)) recording.push({ sql: q.sql, bindings: q.bindings ?? [] });
  });
  return {
    baseUrl: `http://127.0.0.1:${(http.address() as AddressInfo).port}`,
    async record(run) {
      recording = [];
      try {
        await run();
        return recording;
      } finally {
        recording = undefined;
      }
    },
  };
}

/**
 * `EXPLAIN (ANALYZE, BUFFERS)` of each statement, each in a transaction rolled back (writes leave
 * nothing). A write that cannot run twice (the request's own insert, now a duplicate) gets its
 * estimated plan, marked so.
 */
export async function explainStatements(pg: PgClient, statements: Recorded[]): Promise<RoutePlans> {
  const planned: StatementPlan[] = [];
  const explain = async (options: string, sql: string, bindings: readonly unknown[]) => {
    await pg.query('BEGIN');
    try {
      await pg.query(`SET LOCAL statement_timeout = '60s'`);
      const { rows } = await pg.query<{ 'QUERY PLAN': string }>(`EXPLAIN (${options}) ${sql}`, [...bindings]);
      return rows.map((r) => r['QUERY PLAN']);
    } finally {
      await pg.query('ROLLBACK');
    }
  };
  for (const { sql, bindings } of statements) {
    try {
      const plan = await explain('ANALYZE, BUFFERS', sql, bindings);
      const ms = (line: RegExp) => Number(plan.map((l) => line.exec(l)?.[1]).find(Boolean) ?? 0);
      planned.push({
        sql,
        executionMs: ms(/^Execution Time: ([\d.]+) ms/),
        planningMs: ms(/^Planning Time: ([\d.]+) ms/),
        plan,
      });
    } catch (err) {
      const plan = await explain('COSTS', sql, bindings);
      const why = err instanceof Error ? err.message : String(err);
      planned.push({
        sql,
        executionMs: 0,
        planningMs: 0,
        plan: [`(estimated only: running it again failed: ${why})`, ...plan],
      });
    }
  }
  const sum = (of: (s: StatementPlan) => number) => planned.reduce((total, s) => total + of(s), 0);
  return { statements: planned, executionMs: sum((s) => s.executionMs), planningMs: sum((s) => s.planningMs) };
}

/** The slowest statement of a route, as lines to print: its text (shortened) and its plan. */
export function slowestPlanLines(plans: RoutePlans, maxLines = 40): string[] {
  const slowest = [...plans.statements].sort((a, b) => b.executionMs - a.executionMs)[0];
  if (!slowest) return ['  (no statement recorded)'];
  const text = slowest.sql.replace(/\s+/g, ' ');
  const shown = slowest.plan.slice(0, maxLines);
  return [
    `  statement: ${text.length > 300 ? `${text.slice(0, 300)}…` : text}`,
    ...shown.map((line) => `    ${line}`),
    ...(slowest.plan.length > maxLines ? [`    … ${slowest.plan.length - maxLines} more lines`] : []),
  ];
}

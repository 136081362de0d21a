import { postgresDeadlineOf } from '../../src/db/deadlines';
import { createServer, AddressInfo } from 'node:net';
import { status } from '@grpc/grpc-js';
import { Connection } from '@temporalio/client';
import { deadlineInterceptor, temporalDeadlineOf } from '../../src/temporal/deadlines';
import { endCallsAfterClose } from '../helpers/stack';

/** A node-postgres server error as knex rethrows it (the statement prefixed to its message). */
const pgError = (code: string, message: string) =>
  Object.assign(new Error(`select 1 - ${message}`), { code, severity: 'ERROR' });

/** A Temporal client error wrapping a gRPC status, as the SDK throws them. */
const grpcError = (code: number, details: string) =>
  new Error('Failed to signal Workflow', { cause: Object.assign(new Error(details), { code, details, metadata: {} }) });

describe('postgresDeadlineOf', () => {
  it('names the pool-acquire deadline for knex timing out on a free connection', () => {
    const err = Object.assign(new Error('Knex: Timeout acquiring a connection.'), { name: 'KnexTimeoutError' });
    expect(postgresDeadlineOf(err)).toBe('DB_POOL_ACQUIRE_TIMEOUT_MS');
  });

  it('names the statement deadline for SQLSTATE 57014 and lock_timeout for 55P03', () => {
    expect(postgresDeadlineOf(pgError('57014', 'canceling statement due to statement timeout'))).toBe(
      'DB_STATEMENT_TIMEOUT_MS',
    );
    expect(postgresDeadlineOf(pgError('55P03', 'canceling statement due to lock timeout'))).toBe('lock_timeout');
  });

  it('names the client query deadline, even behind the statement knex prefixes', () => {
    expect(postgresDeadlineOf(new Error('Query read timeout'))).toBe('DB_QUERY_TIMEOUT_MS');
    expect(postgresDeadlineOf(new Error('select pg_sleep(9) - Query read timeout'))).toBe('DB_QUERY_TIMEOUT_MS');
  });

  it('names the connect deadline, and none for a Postgres unreachable or going away', () => {
    expect(postgresDeadlineOf(new Error('timeout expired'))).toBe('DB_CONNECT_TIMEOUT_MS');
    expect(postgresDeadlineOf(Object.assign(new Error('connect ECONNREFUSED'), { code: 'ECONNREFUSED' }))).toBe('none');
    expect(postgresDeadlineOf(pgError('57P01', 'terminating connection due to administrator command'))).toBe('none');
  });

  it('counts a Postgres out of disk as unavailable (503 with Retry-After), not as a bug (500)', () => {
    expect(
      postgresDeadlineOf(pgError('53100', 'could not extend file "base/16384/16385": No space left on device')),
    ).toBe('none');
  });

  it('leaves every other error alone (a refusal is not an outage)', () => {
    expect(postgresDeadlineOf(pgError('23505', 'duplicate key value violates unique constraint'))).toBeUndefined();
    expect(postgresDeadlineOf(new Error('constructor'))).toBeUndefined();
    expect(postgresDeadlineOf('timeout expired')).toBeUndefined();
  });
});

describe('temporalDeadlineOf', () => {
  it('names the call deadline for DEADLINE_EXCEEDED and none for UNAVAILABLE, anywhere in the cause chain', () => {
    expect(temporalDeadlineOf(grpcError(4, 'Deadline exceeded'))).toBe('TEMPORAL_CALL_TIMEOUT_MS');
    expect(temporalDeadlineOf(grpcError(14, 'No connection established'))).toBe('none');
  });

  it('takes a call the channel cancelled (a connection that timed out being set up) as an unreachable server', () => {
    expect(temporalDeadlineOf(grpcError(1, 'Call cancelled'))).toBe('none');
  });

  it('takes a call the server shed (a busy workflow while its shard moves, a rate limit) as unavailable for now', () => {
    expect(temporalDeadlineOf(grpcError(8, 'Workflow is busy.'))).toBe('none');
  });

  it('leaves a refusal by the server alone', () => {
    expect(temporalDeadlineOf(grpcError(3, 'invalid search attribute'))).toBeUndefined();
    expect(temporalDeadlineOf(new Error('workflow not found'))).toBeUndefined();
  });
});

/** A port nothing listens on: a call there fails UNAVAILABLE and the SDK waits to retry it. */
async function deadPort(): Promise<number> {
  const free = createServer();
  await new Promise<void>((resolve) => free.listen(0, '127.0.0.1', resolve));
  const { port } = free.address() as AddressInfo;
  await new Promise((resolve) => free.close(resolve));
  return port;
}

/** A call on `connection` closed while its retry waits: how it ended, and what escaped meanwhile. */
async function closeDuringRetry(connection: Connection): Promise<{ ended: unknown; uncaught: unknown[] }> {
  const uncaught: unknown[] = [];
  const onUncaught = (err: unknown) => uncaught.push(err);
  process.on('uncaughtException', onUncaught);
  try {
    const call = connection.workflowService.getSystemInfo({}).then(
      () => 'answered',
      (err: unknown) => (err as { code?: number }).code,
    );
    await new Promise((resolve) => setTimeout(resolve, 50));
    await connection.close();
    const ended = await call;
    await new Promise((resolve) => setTimeout(resolve, 1500));
    return { ended, uncaught };
  } finally {
    process.off('uncaughtException', onUncaught);
  }
}

describe('a connection closed while a call waits for its retry', () => {
  it('ends the call CANCELLED on the API connection (deadlineInterceptor), nothing thrown', async () => {
    const address = `127.0.0.1:${await deadPort()}`;
    const connection = Connection.lazy({ address, interceptors: [deadlineInterceptor(10_000)] });
    expect(await closeDuringRetry(connection)).toEqual({ ended: status.CANCELLED, uncaught: [] });
  }, 10_000);

  it("ends the call CANCELLED on the tests' environment connection (endCallsAfterClose), nothing thrown", async () => {
    const connection = Connection.lazy({ address: `127.0.0.1:${await deadPort()}` });
    endCallsAfterClose(connection);
    expect(await closeDuringRetry(connection)).toEqual({ ended: status.CANCELLED, uncaught: [] });
  }, 10_000);
});

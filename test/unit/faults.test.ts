import { faultOf } from '../../src/telemetry/faults';
import { DeadlineExceeded } from '../../src/telemetry/metrics';

/** What a probe's failure says in /readyz, the flip log line and `ops status`: a class and a sentence, no stack. */
describe('faultOf', () => {
  const errorWith = (message: string, fields: Record<string, unknown>) => Object.assign(new Error(message), fields);

  it.each([
    [new DeadlineExceeded('postgres', 6000), 'deadline', 'no answer within 6000 ms (DB_QUERY_TIMEOUT_MS)'],
    [
      errorWith('connect ECONNREFUSED 127.0.0.1:5432', { code: 'ECONNREFUSED' }),
      'connection_refused',
      'connection refused (ECONNREFUSED)',
    ],
    [errorWith('read ETIMEDOUT', { code: 'ETIMEDOUT' }), 'unreachable', 'unreachable (ETIMEDOUT)'],
    [new Error('select 1 - Query read timeout'), 'deadline', 'no answer within its deadline (DB_QUERY_TIMEOUT_MS)'],
    [
      errorWith('select 1 - the database system is starting up', { code: '57P03', severity: 'FATAL' }),
      'refused',
      'SQLSTATE 57P03: select 1 - the database system is starting up',
    ],
    [new Error('first line\n    at secret (stack.ts:1:1)'), 'error', 'first line'],
  ])('%s → %s', (err, errorClass, detail) => {
    expect(faultOf(err, 'DB_QUERY_TIMEOUT_MS')).toEqual({ error_class: errorClass, detail });
  });
});

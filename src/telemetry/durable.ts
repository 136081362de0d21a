import { Counter } from 'prom-client';
import { registry } from './metrics';

/** Handoff relay tries that Temporal refused or that failed otherwise, by gRPC status name (`other` without one). */
export const handoffRelayFailures = new Counter({
  name: 'svc_handoff_relay_failures_total',
  help: 'Workflow handoffs the relay could not deliver on a try, by gRPC status name (other: no status).',
  labelNames: ['reason'] as const,
  registers: [registry],
});

/** Outbox messages given up after their last try, by kind. */
export const outboxGivenUp = new Counter({
  name: 'svc_outbox_given_up_total',
  help: 'Outbox messages (sms, email) given up after their last try.',
  labelNames: ['kind'] as const,
  registers: [registry],
});

// Both kinds from 0 (as the alert rules expect), so that the first message given up shows as an increase.
for (const kind of ['sms', 'email'] as const) outboxGivenUp.inc({ kind }, 0);

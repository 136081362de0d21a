import type { Db } from '../../db/knex';
import { currentTraceparent } from '../../telemetry/propagation';

/** An SMS message to one E.164 number. */
export interface SmsMessage {
  to: string;
  body: string;
}

/** The OTP provider adapter: sends one message or throws. */
export interface SmsSender {
  send(message: SmsMessage): Promise<void>;
}

/** The SMS adapter: queues each message in the outbox, which the worker's relay sends (`ops outbox list --kind sms`). */
export function outboxSms(db: Db): SmsSender {
  return {
    async send({ to, body }) {
      await db('outbox').insert({ kind: 'sms', to, body, traceparent: currentTraceparent() });
    },
  };
}

/**
 * Test mode's SMS: the message is kept in the outbox, marked `test_mode` and never scheduled, so no
 * relay ever sends it; the code is read with `ops outbox list`.
 */
export function heldOutboxSms(db: Db): SmsSender {
  return {
    async send({ to, body }) {
      await db('outbox').insert({ kind: 'sms', to, body, test_mode: true, next_attempt_at: null });
    },
  };
}

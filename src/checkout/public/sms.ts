import type { Db } from '../../db/knex';

/** An SMS message to one E.164 number. */
export interface SmsMessage {
  to: string;
  body: string;
}

/** The OTP provider adapter: sends one message or throws. */
export interface SmsSender {
  send(message: SmsMessage): Promise<void>;
}

/** The development SMS adapter: records each message in the outbox (`ops outbox list --kind sms`). */
export function outboxSms(db: Db): SmsSender {
  return {
    async send({ to, body }) {
      await db('outbox').insert({ kind: 'sms', to, body });
    },
  };
}

import type { Gateways } from '../gateways';
import type { SessionDeps } from '../sessions/deps';
import type { SmsSender } from './sms';

/** What the public (hosted page) services need beyond the session services. */
export interface PublicDeps extends SessionDeps {
  /** Payment vendors by method code. */
  gateways: Gateways;
  /** Where live-mode OTP codes go (default: the outbox, sent by the relay). */
  sms: SmsSender;
  /** Where test-mode OTP codes go: held in the outbox, never sent. */
  testSms: SmsSender;
  /** Calling codes (`964`) OTP codes may be sent to. */
  otpCountryCodes: readonly string[];
  /** The test phone number: in test mode it always gets the code 000000 and no message. */
  testPhone: string;
}

import type { Gateways } from '../gateways';
import type { SessionDeps } from '../sessions/deps';
import type { SmsSender } from './sms';

/** What the public (hosted page) services need beyond the session services. */
export interface PublicDeps extends SessionDeps {
  /** Payment vendors by method code. */
  gateways: Gateways;
  /** Where OTP codes go (development default: the outbox). */
  sms: SmsSender;
  /** The test phone number: in test mode it always gets the code 000000 and no message. */
  testPhone: string;
}

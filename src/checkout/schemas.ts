import { z } from 'zod';
import { isStorableText, UNSTORABLE_ISSUE } from '../lib/text';
import { eventTypes } from './events';
import { lineItemTypes } from './money';
import { normalisePhone } from './phone';

/** Checkout list parameters: limit 1–100 (default 20), anything else is a 400. */
export const listLimit = z.coerce
  .number({ message: 'limit must be an integer from 1 to 100' })
  .int('limit must be an integer from 1 to 100')
  .min(1, 'limit must be an integer from 1 to 100')
  .max(100, 'limit must be an integer from 1 to 100')
  .default(20);

const STORABLE = UNSTORABLE_ISSUE;

/** A string of `min` to `max` characters that Postgres can store. */
const text = (min: number, max: number) => z.string().min(min).max(max).refine(isStorableText, STORABLE);

const singleQueryValue = z.string({ message: 'must be given once' }).refine(isStorableText, STORABLE);

export const currencyCode = z.string().regex(/^[A-Z]{3}$/, 'Must be a three-letter upper-case ISO 4217 code');

const httpsUrl = text(1, 2048).refine((v) => {
  try {
    return new URL(v).protocol === 'https:';
  } catch {
    return false;
  }
}, 'Must be an absolute https URL');

const phone = z.string().transform((value, ctx) => {
  const normalised = normalisePhone(value);
  if (normalised === null) {
    ctx.addIssue({ code: 'custom', message: 'Must be an E.164 phone number or an Iraqi local number' });
    return z.NEVER;
  }
  return normalised;
});

const collectValue = z.enum(['required', 'optional', 'none']);

export const lineItemIn = z.strictObject({
  label: text(1, 200),
  amount: z.number().int().min(0),
  quantity: z.number().int().min(1).max(100_000).optional(),
  type: z.enum(lineItemTypes),
});

export const sessionIn = z.strictObject({
  reference_id: text(1, 128),
  amount: z.number().int().min(1).max(Number.MAX_SAFE_INTEGER),
  currency: currencyCode,
  line_items: z.array(lineItemIn).min(1).max(100),
  payment_method_types: z.array(text(1, 64)).min(1).max(20).optional(),
  customer: z.strictObject({ phone: phone.optional(), name: text(1, 120).optional() }).optional(),
  collect: z
    .strictObject({
      phone: collectValue.optional(),
      name: collectValue.optional(),
      shipping_address: collectValue.optional(),
    })
    .optional(),
  presentment: z.strictObject({ currency: currencyCode }).optional(),
  locale: z.enum(['ar', 'ku', 'en']).optional(),
  success_url: httpsUrl,
  cancel_url: httpsUrl.optional(),
  expires_at: z.iso.datetime({ offset: true, message: 'Must be an ISO 8601 date-time with a zone' }).optional(),
  metadata: z
    .record(text(1, 40), text(0, 500))
    .refine((m) => Object.keys(m).length <= 50, 'At most 50 keys')
    .optional(),
});
export type SessionIn = z.infer<typeof sessionIn>;

export const sessionStatuses = ['open', 'processing', 'completed', 'expired', 'canceled'] as const;

export const sessionListQuery = z.strictObject({
  reference_id: singleQueryValue.max(128).optional(),
  status: z.enum(sessionStatuses).optional(),
  created_after: z.iso.datetime({ offset: true, message: 'Must be an ISO 8601 date-time with a zone' }).optional(),
  limit: listLimit,
  cursor: singleQueryValue.optional(),
});

export const eventListQuery = z.strictObject({
  type: z.enum(eventTypes).optional(),
  direction: z.enum(['newest_first', 'oldest_first']).default('newest_first').meta({
    description:
      '`newest_first` (default) pages from the newest event back; `oldest_first` reads forward from `since`, for a consumer that follows the log.',
  }),
  since: z.iso.datetime({ offset: true, message: 'Must be an ISO 8601 date-time with a zone' }).optional(),
  delivery_success: z.enum(['true', 'false']).optional().meta({
    description:
      '`false`: only events that at least one endpoint has not received yet after a failed attempt (its latest attempt failed, or was refused because the endpoint is disabled, and no attempt to it succeeded). `true`: only events that no endpoint is waiting for that way.',
  }),
  limit: listLimit,
  cursor: singleQueryValue.optional(),
});

export const idParam = (name: string) => z.object({ [name]: z.string().min(1).max(100) });

/** A session code on public routes: 8–32 upper-case letters and digits (anything else names no session). */
export const SESSION_CODE = /^[A-Z0-9]{8,32}$/;

export const addressIn = z.strictObject({
  governorate: text(1, 100),
  city: text(1, 100),
  line: text(1, 300),
  landmark: text(1, 300).nullable().optional(),
  country: z.string().regex(/^[A-Z]{2}$/, 'Must be a two-letter upper-case country code'),
  geo: z
    .strictObject({
      lat: z.number().min(-90).max(90).nullable(),
      lng: z.number().min(-180).max(180).nullable(),
    })
    .nullable()
    .optional(),
});
export type AddressIn = z.infer<typeof addressIn>;

export const otpRequestIn = z.strictObject({ phone });
export type OtpRequestIn = z.infer<typeof otpRequestIn>;

export const otpVerifyIn = z.strictObject({
  phone,
  code: z.string().regex(/^[0-9]{6}$/, 'Must be the 6-digit code'),
});
export type OtpVerifyIn = z.infer<typeof otpVerifyIn>;

export const customerIn = z
  .strictObject({ name: text(1, 120).optional(), address: addressIn.optional() })
  .refine((c) => c.name !== undefined || c.address !== undefined, 'Give name, address or both');
export type CustomerIn = z.infer<typeof customerIn>;

export const attemptIn = z.strictObject({ method: text(1, 64) });
export type AttemptIn = z.infer<typeof attemptIn>;

export const testGatewayDecisions = ['succeeded', 'failed', 'canceled', 'slow'] as const;
export const decisionIn = z.strictObject({ decision: z.enum(testGatewayDecisions) });

/** The longest fast-forward in one call: 30 days (the longest clock it moves is the 3-day disable). */
export const FAST_FORWARD_MAX_SECONDS = 30 * 24 * 60 * 60;

/** `POST /test_helpers/…/fast_forward`: move the object's deadlines this many seconds earlier. */
const SECONDS_ISSUE = `seconds must be a whole number from 1 to ${FAST_FORWARD_MAX_SECONDS} (30 days)`;
export const fastForwardIn = z.strictObject({
  seconds: z
    .number({ message: SECONDS_ISSUE })
    .int(SECONDS_ISSUE)
    .min(1, SECONDS_ISSUE)
    .max(FAST_FORWARD_MAX_SECONDS, SECONDS_ISSUE),
});

const metadataIn = z.record(text(1, 40), text(0, 500)).refine((m) => Object.keys(m).length <= 50, 'At most 50 keys');

export const refundIn = z.strictObject({
  session_id: text(1, 100),
  amount: z.number().int().min(1).max(Number.MAX_SAFE_INTEGER),
  reason: text(1, 500).optional(),
  metadata: metadataIn.optional(),
});
export type RefundIn = z.infer<typeof refundIn>;

export const refundListQuery = z.strictObject({
  session_id: singleQueryValue.max(100).optional(),
  limit: listLimit,
  cursor: singleQueryValue.optional(),
});

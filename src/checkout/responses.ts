import { z } from 'zod';
import { eventTypes } from './events';
import { lineItemTypes } from './money';
import { sessionStatuses, testGatewayDecisions } from './schemas';

/** What the Checkout API answers, as zod schemas: the OpenAPI document's response bodies and the tests' response check. */

const timestamp = z.iso.datetime().meta({ example: '2026-11-21T10:00:00.000Z' });
const minor = z.number().int().meta({ description: 'Minor units of the currency (IQD has none).', example: 45000 });
const currency = z.string().meta({ example: 'IQD' });
const stringMap = z.record(z.string(), z.string()).meta({ example: { order: '1042' } });
const paymentStatus = z.enum(['unpaid', 'paid', 'requires_offline_collection', 'partially_refunded', 'refunded']);
const collectValue = z.enum(['required', 'optional', 'none']);
const locale = z.enum(['ar', 'ku', 'en']);

export const addressOut = z
  .object({
    governorate: z.string(),
    city: z.string(),
    line: z.string(),
    landmark: z.string().nullable(),
    country: z.string().meta({ example: 'IQ' }),
    geo: z.object({ lat: z.number().nullable(), lng: z.number().nullable() }).nullable(),
  })
  .meta({ id: 'Address' });

const lineItemOut = z.object({
  label: z.string(),
  amount: minor,
  quantity: z.number().int(),
  type: z.enum(lineItemTypes),
});

const collectOut = z.object({ phone: collectValue, name: collectValue, shipping_address: collectValue });

export const paymentOut = z
  .object({
    attempt_id: z.string(),
    method: z.string(),
    gateway: z.string(),
    gateway_reference: z.string().nullable(),
    captured_amount: minor.nullable().meta({ description: 'Null for offline collection (cash on delivery).' }),
    captured_currency: z.string().nullable(),
    presented_amount: minor,
    presented_currency: z.string(),
    fx_rate: z.number().nullable(),
    captured_at: timestamp.nullable(),
    instrument: z.object({ brand: z.string(), last_four: z.string() }).nullable(),
  })
  .meta({ id: 'Payment' });

export const sessionOut = z
  .object({
    id: z.string().meta({ example: 'cs_test_01JD0Q5V7W3X9Y2Z4A6B8C0D1E' }),
    object: z.literal('checkout.session'),
    code: z.string().regex(/^[A-Z0-9]{8,32}$/),
    url: z.string().meta({ description: 'The hosted page for the shopper.' }),
    livemode: z.boolean(),
    status: z.enum(sessionStatuses),
    payment_status: paymentStatus,
    reference_id: z.string(),
    amount: minor,
    currency,
    line_items: z.array(lineItemOut),
    payment_method_types: z.array(z.string()),
    customer: z.object({
      id: z.string().nullable(),
      phone: z.string().nullable(),
      name: z.string().nullable(),
      address: addressOut.nullable(),
    }),
    collect: collectOut,
    presentment: z.object({ currency: z.string(), fx_rate: z.number() }).nullable(),
    payment: paymentOut.nullable().meta({ description: 'Null until an attempt succeeds.' }),
    refunded_amount: minor,
    locale,
    success_url: z.string(),
    cancel_url: z.string().nullable(),
    expires_at: timestamp,
    completed_at: timestamp.nullable(),
    metadata: stringMap,
    created_at: timestamp,
    updated_at: timestamp,
  })
  .meta({ id: 'CheckoutSession' });

const listOf = <T extends z.ZodType>(row: T, id: string) =>
  z
    .object({
      data: z.array(row),
      next_cursor: z.string().nullable().meta({ description: 'Pass back as `cursor`; null on the last page.' }),
    })
    .meta({ id });

export const sessionListOut = listOf(sessionOut, 'CheckoutSessionList');

export const paymentMethodOut = z
  .object({
    code: z.string().meta({ example: 'cashondelivery' }),
    display_name: z.object({ ar: z.string(), ku: z.string(), en: z.string() }),
    flow: z.enum(['redirect', 'offline']),
    currencies: z.array(z.string()),
    limits: z.record(z.string(), z.object({ min: z.number().nullable(), max: z.number().nullable() })),
    capabilities: z.object({
      refunds: z.enum(['partial', 'full_only', 'none']),
      saved_instruments: z.boolean(),
      wallets: z.array(z.string()),
    }),
    enabled: z.boolean(),
  })
  .meta({ id: 'PaymentMethod' });

export const paymentMethodListOut = z.object({ data: z.array(paymentMethodOut) }).meta({ id: 'PaymentMethodList' });

export const refundOut = z
  .object({
    id: z.string().meta({ example: 're_test_01JD0Q5V7W3X9Y2Z4A6B8C0D1E' }),
    object: z.literal('refund'),
    livemode: z.boolean(),
    session_id: z.string(),
    attempt_id: z.string(),
    amount: minor,
    currency,
    reason: z.string(),
    initiated_by: z.string().meta({ example: 'merchant' }),
    status: z.enum(['requested', 'succeeded', 'failed']),
    gateway_reference: z.string().nullable(),
    failure_reason: z.string().nullable(),
    metadata: stringMap,
    created_at: timestamp,
    updated_at: timestamp,
  })
  .meta({ id: 'Refund' });

export const refundListOut = listOf(refundOut, 'RefundList');

export const endpointOut = z
  .object({
    id: z.string().meta({ example: 'we_01JD0Q5V7W3X9Y2Z4A6B8C0D1E' }),
    object: z.literal('webhook_endpoint'),
    url: z.string().meta({ example: 'https://shop.example.com/webhooks' }),
    events: z.array(z.enum([...eventTypes, '*'])),
    mode: z.enum(['live', 'test']),
    status: z.enum(['enabled', 'disabled']),
    disabled_reason: z.string().nullable().meta({ example: 'delivery_failures' }),
    description: z.string().nullable(),
    created_at: timestamp,
  })
  .meta({ id: 'WebhookEndpoint' });

export const endpointWithSecretOut = endpointOut
  .extend({ secret: z.string().meta({ description: 'Shown in this response only.', example: 'whsec_…' }) })
  .meta({ id: 'WebhookEndpointWithSecret' });

export const endpointListOut = z.object({ data: z.array(endpointOut) }).meta({ id: 'WebhookEndpointList' });

export const eventOut = z
  .object({
    id: z.string().meta({ example: 'evt_test_01JD0Q5V7W3X9Y2Z4A6B8C0D1E' }),
    object: z.literal('event'),
    type: z.enum(eventTypes),
    livemode: z.boolean(),
    created_at: timestamp,
    data: z.object({
      object: z
        .record(z.string(), z.unknown())
        .meta({ description: 'The session (with `failed_attempt` on payment.attempt.failed), refund or instrument.' }),
    }),
  })
  .meta({ id: 'Event' });

export const eventListOut = listOf(eventOut, 'EventList');

export const eventWithDeliveriesOut = eventOut
  .extend({
    deliveries: z.array(
      z.object({
        endpoint_id: z.string(),
        attempt_no: z.number().int(),
        status_code: z.number().int().nullable(),
        error: z.string().nullable().meta({ example: 'http_503' }),
        delivered_at: timestamp.nullable(),
        next_retry_at: timestamp.nullable(),
        duration_ms: z.number().int().nullable().meta({
          description:
            'From sending the request to the endpoint’s status line, or to the timeout or network error; null when nothing was sent.',
          example: 84,
        }),
        response_body: z.string().nullable().meta({
          description:
            'The first 1 KB of what the endpoint answered, as UTF-8 (invalid bytes replaced by U+FFFD, control characters other than tab and newline removed); null when it answered nothing.',
          example: '{"error":"order service unavailable"}',
        }),
      }),
    ),
  })
  .meta({ id: 'EventWithDeliveries' });

export const redeliverOut = z
  .object({ endpoints: z.number().int().meta({ description: 'Endpoints the event was queued to again.' }) })
  .meta({ id: 'Redelivery' });

export const testEventOut = z.object({ event_id: z.string() }).meta({ id: 'TestEventSent' });

export const webhookReplayOut = z
  .object({
    id: z.string().meta({ example: 'wr_01JD0Q5V7W3X9Y2Z4A6B8C0D1E00' }),
    object: z.literal('webhook_replay'),
    endpoint_id: z.string(),
    since: z.string().meta({ format: 'date-time' }),
    until: z.string().meta({ format: 'date-time' }),
    types: z.array(z.string()).nullable(),
    queued: z.number().int().meta({ description: 'Events queued as new deliveries through the normal schedule.' }),
    created_at: z.string().meta({ format: 'date-time' }),
  })
  .meta({ id: 'WebhookReplay' });

const merchantDisplay = z.object({
  display_name: z.string(),
  logo_url: z.string().nullable(),
  accent: z.string().nullable(),
});

const profileOut = z.object({
  name: z.string().nullable(),
  addresses: z.array(addressOut),
  instruments: z.array(
    z.object({
      id: z.string(),
      object: z.literal('instrument'),
      gateway: z.string(),
      brand: z.string(),
      last_four: z.string(),
      expiry: z.string(),
      status: z.string(),
    }),
  ),
});

export const publicSessionOut = z
  .object({
    code: z.string(),
    status: z.enum(sessionStatuses),
    payment_status: paymentStatus,
    reference_id: z.string(),
    amount: minor,
    currency,
    line_items: z.array(lineItemOut),
    merchant: merchantDisplay,
    methods: z.array(
      paymentMethodOut.extend({
        available: z.boolean(),
        unavailable_reason: z.string().nullable(),
        presented_amount: minor.nullable(),
        presented_currency: z.string().nullable(),
      }),
    ),
    customer: z.object({
      phone: z.string().nullable(),
      phone_verified: z.boolean(),
      name: z.string().nullable(),
      address: addressOut.nullable(),
    }),
    collect: collectOut,
    locale,
    expires_at: timestamp,
    cancel_url: z.string().nullable(),
    livemode: z.boolean(),
    profile: profileOut.optional().meta({ description: 'Only with a customer token valid for this session.' }),
  })
  .meta({ id: 'PublicSession' });

export const otpSentOut = z
  .object({
    sent: z.boolean().meta({ description: 'False for the test phone (no SMS is sent).' }),
    retry_after: z.number().int().meta({ description: 'Seconds until the page may offer to send another code.' }),
  })
  .meta({ id: 'OtpSent' });

export const otpVerifiedOut = z
  .object({ customer_token: z.string(), expires_at: timestamp, profile: profileOut })
  .meta({ id: 'OtpVerified' });

const attemptStatus = z.enum(['pending', 'succeeded', 'failed', 'canceled']);

export const attemptCreatedOut = z
  .object({
    attempt_id: z.string().meta({ example: 'pa_test_01JD0Q5V7W3X9Y2Z4A6B8C0D1E' }),
    kind: z.enum(['redirect', 'offline']),
    redirect_url: z.string().optional().meta({ description: 'Redirect flow only.' }),
    status: attemptStatus,
    session_status: z.enum(sessionStatuses),
    payment_status: paymentStatus,
  })
  .meta({ id: 'AttemptCreated' });

const attemptPollShape = {
  attempt_id: z.string(),
  code: z.string(),
  method: z.string(),
  status: attemptStatus,
  session_status: z.enum(sessionStatuses),
  payment_status: paymentStatus,
  redirect_to: z.string().nullable(),
  failure_reason: z.string().nullable(),
  present: z.object({ amount: minor, currency: z.string() }),
  cancel_url: z.string().nullable(),
};

export const attemptPollOut = z.object(attemptPollShape).meta({ id: 'AttemptPoll' });

export const attemptLookupOut = z
  .object({ ...attemptPollShape, merchant: merchantDisplay, locale, livemode: z.boolean() })
  .meta({ id: 'AttemptLookup' });

export const testGatewayOut = z
  .object({
    attempt_id: z.string(),
    status: attemptStatus,
    amount: minor,
    currency: z.string(),
    merchant: z.object({ display_name: z.string() }),
    livemode: z.boolean(),
    return_url: z.string(),
  })
  .meta({ id: 'TestGatewayAttempt' });

export const testGatewayDecisionOut = z
  .object({ attempt_id: z.string(), status: attemptStatus, return_url: z.string() })
  .meta({ id: 'TestGatewayDecision', description: `After one of: ${testGatewayDecisions.join(', ')}.` });

/** Request schemas of the webhook routes (zod): endpoints, test events, replays. */
import { z } from 'zod';
import { eventTypes } from '../checkout/events';
import { isStorableText, UNSTORABLE_ISSUE } from '../lib/text';

/** An event type, or `*` for every type. */
const eventSelector = z.enum([...eventTypes, '*'], { message: `Must be an event type or *` });

const events = z
  .array(eventSelector)
  .min(1, 'At least one event type, or *')
  .max(eventTypes.length + 1)
  .transform((list) => [...new Set(list)]);

/** The URL's shape only; whether it is a safe target is the URL-safety check's business. */
const url = z.string().min(1).max(2048).refine(isStorableText, UNSTORABLE_ISSUE);
const description = z.string().max(200, 'At most 200 characters').refine(isStorableText, UNSTORABLE_ISSUE).nullable();

export const endpointIn = z.strictObject({
  url,
  events,
  mode: z.enum(['live', 'test']),
  description: description.optional(),
});
export type EndpointIn = z.infer<typeof endpointIn>;

export const endpointPatch = z.strictObject({
  url: url.optional(),
  events: events.optional(),
  status: z.enum(['enabled', 'disabled']).optional(),
  description: description.optional(),
});
export type EndpointPatch = z.infer<typeof endpointPatch>;

export const testEventIn = z.strictObject({ type: z.enum(eventTypes) });

const instant = z.iso.datetime({ offset: true, message: 'Must be an ISO 8601 date-time with a zone' });

export const replayIn = z.strictObject({
  since: instant,
  until: instant,
  types: z
    .array(z.enum(eventTypes))
    .min(1)
    .max(eventTypes.length)
    .transform((list) => [...new Set(list)])
    .optional(),
});
export type ReplayIn = z.infer<typeof replayIn>;

import { constants, deflateRawSync, inflateRawSync } from 'node:zlib';

/**
 * An event's payload as stored (`events.payload`, bytea): one format byte, then the object's JSON
 * compressed by raw deflate with a preset dictionary of the keys and common values of the objects
 * events carry (a session, a failed attempt, a refund). A session object (about 880 bytes of JSON,
 * about 1.3 KB as jsonb) takes about 300 bytes, so the row stays far below the 2 KB at which
 * Postgres would compress it itself; rows from before (`data_object`, jsonb) are read as they are.
 */

/** Format 1: raw deflate (level 9) with DICTIONARY_1. A new dictionary gets a new format byte: stored rows keep theirs. */
const FORMAT_DEFLATE_1 = 1;

/**
 * Never edit: every row written with format 1 is read back with exactly these bytes. The likeliest
 * strings come last (deflate reaches the end of the window with the shortest distances).
 */
const DICTIONARY_1 = Buffer.from(
  [
    '{"id":"re_test_","object":"refund","livemode":false,"session_id":"cs_test_","attempt_id":"pa_test_",',
    '"amount":0,"currency":"IQD","reason":"requested_by_customer","initiated_by":"merchant","status":"pending",',
    '"gateway_reference":null,"failure_reason":null,"metadata":{},"created_at":"2026-11-25T00:00:00.000Z",',
    '"updated_at":"2026-11-25T00:00:00.000Z"}',
    '"failed_attempt":{"id":"pa_test_","object":"payment.attempt","method":"card","gateway":"test","status":"failed",',
    '"failure_code":"card_declined","failure_message":"The card was declined.","created_at":"2026-11-25T',
    '{"id":"cs_live_","object":"checkout.session","code":"","url":"https://pay.example.com/c/","livemode":true,',
    '"status":"expired","payment_status":"unpaid","status":"canceled","status":"open",',
    '{"id":"cs_test_","object":"checkout.session","code":"","url":"https://localhost/c/","livemode":false,',
    '"status":"completed","payment_status":"paid","reference_id":"order-","amount":45000,"currency":"IQD",',
    '"line_items":[{"label":"","amount":0,"quantity":1,"type":"charge"},{"label":"Delivery","amount":3000,"quantity":null,"type":"shipping"}],',
    '"payment_method_types":["card","zaincash","fib","test"],',
    '"customer":{"id":null,"phone":"+96477","name":null,"address":null},',
    '"collect":{"phone":"required","name":"optional","shipping_address":"none"},',
    '"presentment":null,"payment":{"attempt_id":"pa_test_","method":"card","gateway":"test"},"payment":null,',
    '"refunded_amount":0,"locale":"en","locale":"ar","success_url":"https://","cancel_url":null,',
    '"expires_at":"2026-11-2","completed_at":null,"completed_at":"2026-11-2","metadata":{"order":""},',
    '"created_at":"2026-11-2","updated_at":"2026-11-2',
  ].join(''),
);

/** The stored form of an event's payload. */
export function packPayload(object: unknown): Buffer {
  const body = deflateRawSync(Buffer.from(JSON.stringify(object)), {
    dictionary: DICTIONARY_1,
    level: constants.Z_BEST_COMPRESSION,
  });
  return Buffer.concat([Buffer.of(FORMAT_DEFLATE_1), body]);
}

/** The object a stored payload holds. */
export function unpackPayload(stored: Buffer): unknown {
  if (stored[0] !== FORMAT_DEFLATE_1) throw new Error(`unknown event payload format ${stored[0]}`);
  return JSON.parse(inflateRawSync(stored.subarray(1), { dictionary: DICTIONARY_1 }).toString('utf8'));
}

/**
 * An events row as the code uses it: `data_object` from whichever column holds it (the compressed
 * `payload` of rows written since 20261126020000, the jsonb of older ones), `payload` left out.
 */
export function decodeEventRow<T extends { data_object?: unknown; payload?: Buffer | null }>(
  row: T,
): Omit<T, 'payload'> {
  const { payload, ...rest } = row;
  if (payload) return { ...rest, data_object: unpackPayload(payload) };
  return rest;
}

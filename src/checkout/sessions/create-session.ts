import type { Db } from '../../db/knex';
import { ApiError, ErrorDetail } from '../../http/errors';
import { canonicalJson, sha256Hex } from '../../lib/hash';
import { newId, randomString } from '../../lib/ids';
import { sessionsCreated } from '../../telemetry/checkout';
import { handOff, Handoff, insertWithHandoff, PendingHandoff, recordHandoff } from '../../temporal/handoffs';
import { LineItem, lineItemsTotal, minorUnitExponents } from '../money';
import { methodsForMode } from '../payment-methods';
import { convertAmount } from '../presentment';
import type { SessionIn } from '../schemas';
import type { MerchantScope, SessionDeps } from './deps';
import { SessionRow } from './session-row';
import { expireOpenSession } from './transitions';

/** Session lifetime: default and the range `expires_at` may ask for. */
export const sessionLifetime = { defaultMs: 60 * 60 * 1000, minMs: 5 * 60 * 1000, maxMs: 24 * 60 * 60 * 1000 } as const;

const CODE_ALPHABET = 'ABCDEFGHJKLMNPQRSTUVWXYZ23456789';
const CODE_LENGTH = 16;

export interface CreateScope extends MerchantScope {
  testMerchant: boolean;
}

export interface CreateResult {
  session: SessionRow;
  /** True for a new session (201); false when an open one with the same price was returned (200). */
  created: boolean;
  /** The session this create expired because its price differed, if any. */
  replaced: SessionRow | null;
}

/** What the create checks read from Postgres, fetched in one round trip. */
interface MerchantSettings {
  returnHosts: string[];
  methods: Map<string, boolean>;
  /** The rate from the session currency to the presentment currency, if one is recorded. */
  fxRate: number | null;
}

async function merchantSettings(db: Db, scope: MerchantScope, input: SessionIn): Promise<MerchantSettings> {
  const { rows } = await db.raw(
    `SELECT (SELECT coalesce(array_agg(host), '{}') FROM merchant_return_hosts WHERE merchant_id = ?) AS hosts,
            (SELECT coalesce(json_object_agg(code, enabled), '{}') FROM merchant_methods
              WHERE merchant_id = ? AND mode = ?) AS methods,
            (SELECT rate FROM fx_rates WHERE from_currency = ? AND to_currency = ?) AS fx_rate`,
    [scope.merchantId, scope.merchantId, scope.mode, input.currency, input.presentment?.currency ?? input.currency],
  );
  const row: { hosts: string[]; methods: Record<string, boolean>; fx_rate: string | null } = rows[0];
  return {
    returnHosts: row.hosts,
    methods: new Map(Object.entries(row.methods)),
    fxRate: row.fx_rate === null ? null : Number(row.fx_rate),
  };
}

/** Host rule: exact names, or `*.example.com` for any sub-domain of example.com. */
function hostAllowed(host: string, allowed: string[]): boolean {
  const h = host.toLowerCase();
  return allowed.some((a) => (a.startsWith('*.') ? h.endsWith(a.slice(1)) && h.length > a.length - 1 : h === a));
}

function unsupportedCurrency(field: string, code: string): ApiError {
  return new ApiError(400, 'unsupported_currency', `${code} has no recorded minor-unit exponent.`, [
    { field, issue: 'unsupported' },
  ]);
}

/** Currencies and the amount rule: checks that need nothing from Postgres. */
function checkAmounts(input: SessionIn, lineItems: LineItem[]): void {
  if (!Object.hasOwn(minorUnitExponents, input.currency)) throw unsupportedCurrency('currency', input.currency);
  if (input.presentment && !Object.hasOwn(minorUnitExponents, input.presentment.currency)) {
    throw unsupportedCurrency('presentment.currency', input.presentment.currency);
  }
  const total = lineItemsTotal(lineItems);
  if (total !== BigInt(input.amount)) {
    throw new ApiError(400, 'amount_mismatch', `line_items net to ${total}, not amount ${input.amount}.`, [
      { field: 'line_items', issue: 'sum_differs' },
    ]);
  }
}

/** Return hosts, expiry, methods and presentment, against the merchant's settings. */
function checkMerchantRules(scope: CreateScope, input: SessionIn, settings: MerchantSettings, now: Date) {
  const badHosts: ErrorDetail[] = (['success_url', 'cancel_url'] as const)
    .filter((f) => input[f] !== undefined && !hostAllowed(new URL(input[f]!).hostname, settings.returnHosts))
    .map((field) => ({ field, issue: 'host_not_allowed' }));
  if (badHosts.length > 0) {
    throw new ApiError(
      422,
      'return_host_not_allowed',
      'Return URLs must use a host registered on your account.',
      badHosts,
    );
  }

  const expiresAt = input.expires_at ? new Date(input.expires_at) : new Date(now.getTime() + sessionLifetime.defaultMs);
  const ttl = expiresAt.getTime() - now.getTime();
  if (ttl < sessionLifetime.minMs || ttl > sessionLifetime.maxMs) {
    throw new ApiError(422, 'expiry_out_of_range', 'expires_at must be between 5 minutes and 24 hours from now.', [
      { field: 'expires_at', issue: 'out_of_range' },
    ]);
  }

  const enabled = methodsForMode(scope.mode, settings.methods)
    .filter((m) => m.enabled)
    .map((m) => m.code);
  let methodTypes: string[];
  if (input.payment_method_types) {
    const notEnabled = input.payment_method_types
      .map((code, i) => ({ code, i }))
      .filter(({ code }) => !enabled.includes(code))
      .map(({ i }) => ({ field: `payment_method_types.${i}`, issue: 'not_enabled' }));
    if (notEnabled.length > 0) {
      throw new ApiError(
        422,
        'method_not_enabled',
        'A payment method is not enabled for this account and mode.',
        notEnabled,
      );
    }
    methodTypes = [...new Set(input.payment_method_types)];
  } else {
    // A test merchant never gets the test method by default: it must be asked for explicitly.
    methodTypes = enabled.filter((code) => !(scope.testMerchant && code === 'test'));
    if (methodTypes.length === 0) {
      throw new ApiError(
        422,
        'method_not_enabled',
        'No payment method is enabled for this account and mode (on a test merchant, ask for test explicitly).',
        [{ field: 'payment_method_types', issue: 'none_enabled' }],
      );
    }
  }

  let presentment: { currency: string; fx_rate: number } | null = null;
  if (input.presentment) {
    const to = input.presentment.currency;
    if (to !== input.currency && settings.fxRate === null) {
      throw new ApiError(400, 'unsupported_currency', `No exchange rate from ${input.currency} to ${to} is recorded.`, [
        { field: 'presentment.currency', issue: 'no_fx_rate' },
      ]);
    }
    presentment = { currency: to, fx_rate: to === input.currency ? 1 : settings.fxRate! };
    if (convertAmount(input.amount, input.currency, to, presentment.fx_rate) === null) {
      throw ApiError.validation(`amount in ${to} at the recorded rate is beyond ${Number.MAX_SAFE_INTEGER}.`, [
        { field: 'amount', issue: 'conversion_out_of_range' },
      ]);
    }
  }
  return { expiresAt, methodTypes, presentment };
}

/** The at most one open (or processing) session per (merchant, mode, reference_id), as the insert's arbiter. */
const ONE_OPEN = `(merchant_id, mode, reference_id) WHERE status IN ('open', 'processing')`;

/**
 * Creates a session, reconciling on (merchant, mode, reference_id): an open session with the same
 * amount, currency and line items is returned unchanged; one with another price (or one whose
 * `expires_at` has passed before its timer fired) is expired with its event and replaced.
 *
 * A new reference id costs one statement: the INSERT, which the partial unique index refuses when a
 * session is still open, and with it the handoff that starts the session's workflow (id = session
 * id). Only a refusal opens a transaction, serialised per reference id by an advisory lock, to
 * reconcile. The workflow is started after the commit (the API at once, the handoff relay if the
 * API died first), so a create that returns an existing session starts nothing, and no database
 * connection waits on Temporal.
 */
export async function createSession(deps: SessionDeps, scope: CreateScope, input: SessionIn): Promise<CreateResult> {
  const { db, clock, publicBaseUrl } = deps;
  const now = clock();
  const lineItems: LineItem[] = input.line_items.map((i) => ({
    label: i.label,
    amount: i.amount,
    quantity: i.quantity ?? 1,
    type: i.type,
  }));
  checkAmounts(input, lineItems);
  const { expiresAt, methodTypes, presentment } = checkMerchantRules(
    scope,
    input,
    await merchantSettings(db, scope, input),
    now,
  );
  const priceKey = sha256Hex(canonicalJson({ amount: input.amount, currency: input.currency, line_items: lineItems }));
  const row = {
    id: newId('cs', scope.mode),
    merchant_id: scope.merchantId,
    mode: scope.mode,
    code: randomString(CODE_LENGTH, CODE_ALPHABET),
    status: 'open',
    payment_status: 'unpaid',
    reference_id: input.reference_id,
    amount: input.amount,
    currency: input.currency,
    line_items: JSON.stringify(lineItems),
    price_key: priceKey,
    payment_method_types: JSON.stringify(methodTypes),
    customer: JSON.stringify({
      phone: input.customer?.phone ?? null,
      name: input.customer?.name ?? null,
      address: null,
    }),
    collect: JSON.stringify({
      phone: input.collect?.phone ?? 'required',
      name: input.collect?.name ?? 'required',
      shipping_address: input.collect?.shipping_address ?? 'none',
    }),
    presentment: presentment ? JSON.stringify(presentment) : null,
    locale: input.locale ?? 'ar',
    success_url: input.success_url,
    cancel_url: input.cancel_url ?? null,
    metadata: JSON.stringify(input.metadata ?? {}),
    expires_at: expiresAt,
    created_at: now,
    updated_at: now,
  };

  const start: Handoff = {
    kind: 'session_start',
    session: {
      sessionId: row.id,
      expiresAtMs: expiresAt.getTime(),
      merchantId: scope.merchantId,
      merchantName: scope.merchantName,
      mode: scope.mode,
      referenceId: input.reference_id,
      amount: input.amount,
      currency: input.currency,
    },
  };
  const pending: PendingHandoff[] = [];

  /** Returns the open session at the same price, or replaces it; undefined when none is open any more. */
  const reconcile = async (trx: Db): Promise<CreateResult | undefined> => {
    await trx.raw('SELECT pg_advisory_xact_lock(hashtextextended(?, 0))', [
      `session:${scope.merchantId}:${scope.mode}:${input.reference_id}`,
    ]);
    const open: SessionRow | undefined = await trx('checkout_sessions')
      .where({ merchant_id: scope.merchantId, mode: scope.mode, reference_id: input.reference_id })
      .whereIn('status', ['open', 'processing'])
      .first();
    if (!open) return undefined;
    const overdue = open.status === 'open' && new Date(open.expires_at).getTime() <= now.getTime();
    if (open.price_key === priceKey && !overdue) return { session: open, created: false, replaced: null };
    const expired = await expireOpenSession(trx, {
      sessionId: open.id,
      publicBaseUrl,
      now,
      settledBy: 'replaced by a new price',
    });
    if (!expired?.handoff) {
      throw ApiError.conflict(
        'session_not_open',
        'The earlier session for this reference_id has a payment in progress.',
      );
    }
    const [session]: SessionRow[] = await trx('checkout_sessions').insert(row).returning('*');
    pending.push(expired.handoff, await recordHandoff(trx, scope, start));
    return { session, created: true, replaced: expired.session };
  };

  let result: CreateResult | undefined;
  // An open session that vanishes between the refused INSERT and the lock (its timer fired) just means: try again.
  for (let attempt = 0; !result; attempt++) {
    if (attempt === 5) throw new Error(`reference_id ${input.reference_id} kept changing under five creates`);
    const inserted = await insertWithHandoff<SessionRow>(
      db,
      db('checkout_sessions').insert(row).onConflict(db.raw(ONE_OPEN)).ignore().returning('*'),
      scope,
      start,
    );
    if (inserted) pending.push(inserted.pending);
    result = inserted ? { session: inserted.row, created: true, replaced: null } : await db.transaction(reconcile);
  }
  if (result.created) sessionsCreated.inc({ mode: scope.mode });
  await handOff(deps, pending);
  return result;
}

import type { Db } from '../../db/knex';
import { ApiError, ErrorDetail } from '../../http/errors';
import { canonicalJson, sha256Hex } from '../../lib/hash';
import { newId, randomString } from '../../lib/ids';
import { signalSessionSettled, startSessionWorkflow } from '../../temporal/sessions';
import { LineItem, lineItemsTotal, minorUnitExponents } from '../money';
import { listMerchantMethods } from '../payment-methods';
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

/** The checks zod cannot make alone: currencies, the amount rule, hosts, expiry, methods. */
async function checkBusinessRules(db: Db, scope: CreateScope, input: SessionIn, lineItems: LineItem[], now: Date) {
  if (!(input.currency in minorUnitExponents)) throw unsupportedCurrency('currency', input.currency);
  if (input.presentment && !(input.presentment.currency in minorUnitExponents)) {
    throw unsupportedCurrency('presentment.currency', input.presentment.currency);
  }
  const total = lineItemsTotal(lineItems);
  if (total !== input.amount) {
    throw new ApiError(400, 'amount_mismatch', `line_items net to ${total}, not amount ${input.amount}.`, [
      { field: 'line_items', issue: 'sum_differs' },
    ]);
  }

  const hosts: string[] = await db('merchant_return_hosts').where({ merchant_id: scope.merchantId }).pluck('host');
  const badHosts: ErrorDetail[] = (['success_url', 'cancel_url'] as const)
    .filter((f) => input[f] !== undefined && !hostAllowed(new URL(input[f]!).hostname, hosts))
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

  const methods = await listMerchantMethods(db, scope.merchantId, scope.mode);
  const enabled = methods.filter((m) => m.enabled).map((m) => m.code);
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
  return { expiresAt, methodTypes };
}

async function presentment(db: Db, input: SessionIn) {
  if (!input.presentment) return null;
  const to = input.presentment.currency;
  if (to === input.currency) return { currency: to, fx_rate: 1 };
  const row = await db('fx_rates').where({ from_currency: input.currency, to_currency: to }).first('rate');
  if (!row) {
    throw new ApiError(400, 'unsupported_currency', `No exchange rate from ${input.currency} to ${to} is recorded.`, [
      { field: 'presentment.currency', issue: 'no_fx_rate' },
    ]);
  }
  return { currency: to, fx_rate: Number(row.rate) };
}

/**
 * Creates a session, reconciling on (merchant, mode, reference_id): an open session with the same
 * amount, currency and line items is returned unchanged; one with another price (or one whose
 * `expires_at` has passed before its timer fired) is expired with its event and replaced. An
 * advisory lock serialises creates for one reference id. The session's workflow is started before
 * the row commits, so no committed session is ever without its expiry timer.
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
  const { expiresAt, methodTypes } = await checkBusinessRules(db, scope, input, lineItems, now);
  const fx = await presentment(db, input);
  const priceKey = sha256Hex(canonicalJson({ amount: input.amount, currency: input.currency, line_items: lineItems }));

  const result = await db.transaction(async (trx): Promise<CreateResult> => {
    await trx.raw('SELECT pg_advisory_xact_lock(hashtextextended(?, 0))', [
      `session:${scope.merchantId}:${scope.mode}:${input.reference_id}`,
    ]);
    const open: SessionRow | undefined = await trx('checkout_sessions')
      .where({ merchant_id: scope.merchantId, mode: scope.mode, reference_id: input.reference_id })
      .whereIn('status', ['open', 'processing'])
      .first();
    let replaced: SessionRow | null = null;
    if (open) {
      const overdue = open.status === 'open' && new Date(open.expires_at).getTime() <= now.getTime();
      if (open.price_key === priceKey && !overdue) return { session: open, created: false, replaced: null };
      const expired = await expireOpenSession(trx, { sessionId: open.id, publicBaseUrl, now });
      if (!expired?.changed) {
        throw ApiError.conflict(
          'session_not_open',
          'The earlier session for this reference_id has a payment in progress.',
        );
      }
      replaced = expired.session;
    }
    const [session]: SessionRow[] = await trx('checkout_sessions')
      .insert({
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
        presentment: fx ? JSON.stringify(fx) : null,
        locale: input.locale ?? 'ar',
        success_url: input.success_url,
        cancel_url: input.cancel_url ?? null,
        metadata: JSON.stringify(input.metadata ?? {}),
        expires_at: expiresAt,
        created_at: now,
        updated_at: now,
      })
      .returning('*');
    // Before commit: if the start fails the row rolls back; if the commit fails the timer finds no row.
    await startSessionWorkflow(deps.temporal, deps.taskQueue, {
      sessionId: session.id,
      expiresInMs: expiresAt.getTime() - clock().getTime(),
    });
    return { session, created: true, replaced };
  });
  if (result.replaced)
    await signalSessionSettled(deps.temporal, result.replaced.id, 'expired', 'replaced by a new price');
  return result;
}

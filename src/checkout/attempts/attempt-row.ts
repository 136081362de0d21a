import type { KeyMode } from '../../keys/keys';
import type { SessionRow } from '../sessions/session-row';
import type { MerchantDisplay } from '../public/public-session';

export type AttemptStatus = 'pending' | 'succeeded' | 'failed' | 'canceled';

/** A `payment_attempts` row as knex returns it. */
export interface AttemptRow {
  id: string;
  session_id: string;
  merchant_id: string;
  mode: KeyMode;
  method: string;
  gateway: string;
  flow: 'redirect' | 'offline';
  status: AttemptStatus;
  presented_amount: number;
  presented_currency: string;
  /** numeric: a string from Postgres. */
  fx_rate: string | null;
  decision: 'succeeded' | 'failed' | 'canceled' | 'slow' | null;
  verify_requested_at: Date | null;
  failure_reason: string | null;
  gateway_reference: string | null;
  captured_amount: number | null;
  captured_currency: string | null;
  captured_at: Date | null;
  checks: number;
  last_checked_at: Date | null;
  resolved_at: Date | null;
  created_at: Date;
  updated_at: Date;
  /** How far test mode's fast-forward moved the attempt's clocks while it was pending (bigint: a string). */
  fast_forwarded_ms: string;
}

/** Where the attempt's clocks (its 24 hours, the amount rule, the slow button) count from: its start, fast-forwarded. */
export const attemptClockStartMs = (a: Pick<AttemptRow, 'created_at' | 'fast_forwarded_ms'>): number =>
  new Date(a.created_at).getTime() - Number(a.fast_forwarded_ms ?? 0);

const hostedBase = (url: string) => url.replace(/\/$/, '');

/** Where the test gateway sends the shopper back: the hosted return page, which asks the API to verify. */
export const returnUrl = (publicBaseUrl: string, attemptId: string) => `${hostedBase(publicBaseUrl)}/r/${attemptId}`;

/** What an attempt poll shows of the attempt's session (read with the attempt, in the same statement). */
export type PollSession = Pick<
  SessionRow,
  'id' | 'code' | 'mode' | 'status' | 'payment_status' | 'reference_id' | 'success_url' | 'cancel_url' | 'locale'
>;

/** The merchant's success_url with session_id and reference_id appended (never a status). */
export function successRedirect(session: Pick<SessionRow, 'id' | 'reference_id' | 'success_url'>): string {
  const url = new URL(session.success_url);
  url.searchParams.append('session_id', session.id);
  url.searchParams.append('reference_id', session.reference_id);
  return url.toString();
}

/** The `failed_attempt` of a `payment.attempt.failed` event. */
export function failedAttemptOut(a: AttemptRow) {
  return { attempt_id: a.id, method: a.method, gateway: a.gateway, status: a.status, reason: a.failure_reason };
}

/** The session's `payment` object for a completed attempt (captured fields null for offline collection). */
export function paymentOut(a: AttemptRow) {
  return {
    attempt_id: a.id,
    method: a.method,
    gateway: a.gateway,
    gateway_reference: a.gateway_reference,
    captured_amount: a.captured_amount,
    captured_currency: a.captured_currency,
    presented_amount: a.presented_amount,
    presented_currency: a.presented_currency,
    fx_rate: a.fx_rate === null ? null : Number(a.fx_rate),
    captured_at: a.captured_at ? new Date(a.captured_at).toISOString() : null,
    instrument: null,
  };
}

/** The answer to `POST …/attempts`. */
export function attemptCreatedOut(a: AttemptRow, session: SessionRow, redirectUrl: string | null) {
  return {
    attempt_id: a.id,
    kind: a.flow,
    ...(a.flow === 'redirect' ? { redirect_url: redirectUrl } : {}),
    status: a.status,
    session_status: session.status,
    payment_status: session.payment_status,
  };
}

/**
 * The attempt poll. `redirect_to` is the success_url (with session_id and reference_id) once the
 * attempt completed the session, else null; `present` is what the attempt asks the shopper to pay.
 */
export function attemptPollOut(a: AttemptRow, session: PollSession) {
  return {
    attempt_id: a.id,
    code: session.code,
    method: a.method,
    status: a.status,
    session_status: session.status,
    payment_status: session.payment_status,
    redirect_to: a.status === 'succeeded' && session.status === 'completed' ? successRedirect(session) : null,
    failure_reason: a.failure_reason,
    present: { amount: a.presented_amount, currency: a.presented_currency },
    cancel_url: session.cancel_url,
  };
}

/** The poll without a session code adds what a return page opened elsewhere needs to render. */
export function attemptLookupOut(a: AttemptRow, session: PollSession, merchant: MerchantDisplay) {
  return {
    ...attemptPollOut(a, session),
    merchant,
    locale: session.locale,
    livemode: session.mode === 'live',
  };
}

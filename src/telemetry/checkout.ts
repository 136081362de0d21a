import { Counter, Gauge } from 'prom-client';
import { ApiError } from '../http/errors';
import { registry } from './metrics';

/** Checkout sessions created (a create that returned the open session is not counted). */
export const sessionsCreated = new Counter({
  name: 'svc_checkout_sessions_created_total',
  help: 'Checkout sessions created, by mode.',
  labelNames: ['mode'] as const,
  registers: [registry],
});

/** Sessions completed, by how they were paid (`paid`, `requires_offline_collection`). */
export const sessionsCompleted = new Counter({
  name: 'svc_checkout_sessions_completed_total',
  help: 'Checkout sessions completed, by mode and payment status.',
  labelNames: ['mode', 'payment_status'] as const,
  registers: [registry],
});

const sessionsExpired = new Counter({
  name: 'svc_checkout_sessions_expired_total',
  help: 'Checkout sessions expired (timer, /expire, replaced by a new price), by mode.',
  labelNames: ['mode'] as const,
  registers: [registry],
});

const sessionsCanceled = new Counter({
  name: 'svc_checkout_sessions_canceled_total',
  help: 'Checkout sessions canceled by the shopper, by mode.',
  labelNames: ['mode'] as const,
  registers: [registry],
});

/** Counts an open session closed as `to`. */
export function countSessionClosed(to: 'expired' | 'canceled', mode: string): void {
  (to === 'expired' ? sessionsExpired : sessionsCanceled).inc({ mode });
}

/** Payment attempts settled, by mode, method and outcome. */
export const paymentAttempts = new Counter({
  name: 'svc_checkout_payment_attempts_total',
  help: 'Payment attempts settled, by mode, method and outcome (succeeded, failed, canceled, timeout).',
  labelNames: ['mode', 'method', 'outcome'] as const,
  registers: [registry],
});

/** Refunds settled, by mode and outcome. */
export const refunds = new Counter({
  name: 'svc_checkout_refunds_total',
  help: 'Refunds settled, by mode and outcome (succeeded, failed).',
  labelNames: ['mode', 'outcome'] as const,
  registers: [registry],
});

/** OTP codes sent, verified, locked (too many wrong codes) and refused (by error code). */
export const otp = new Counter({
  name: 'svc_checkout_otp_total',
  help: 'OTP events: sent, verified, locked, refused (reason: the error code; none otherwise).',
  labelNames: ['event', 'reason'] as const,
  registers: [registry],
});

/**
 * Runs an OTP request or verification and counts what came of it: `event` when it succeeds,
 * `refused` with the error code when it is refused (an ApiError: wrong, expired, locked, rate-limited…).
 */
export async function countOtp<T>(event: 'sent' | 'verified', work: () => Promise<T>): Promise<T> {
  try {
    const result = await work();
    otp.inc({ event, reason: 'none' });
    return result;
  } catch (err) {
    if (err instanceof ApiError) otp.inc({ event: 'refused', reason: err.code });
    throw err;
  }
}

/** Attempt event streams (`…/attempts/{id}/stream`) open in this process. */
export const attemptStreamsOpen = new Gauge({
  name: 'svc_checkout_attempt_streams_open',
  help: 'Attempt event streams open in this process.',
  registers: [registry],
});

/** Notifications of settled attempts the process's LISTEN connection received. */
export const attemptNotifications = new Counter({
  name: 'svc_checkout_attempt_notifications_total',
  help: 'Settled-attempt notifications received by the attempt streams LISTEN connection.',
  registers: [registry],
});

/** Times the attempt streams LISTEN connection was re-opened after it was lost. */
export const attemptListenerReconnects = new Counter({
  name: 'svc_checkout_attempt_listener_reconnects_total',
  help: 'Re-opens of the attempt streams LISTEN connection after it was lost.',
  registers: [registry],
});

/** Test-gateway presses whose decision Update was not taken in time and went as the signal (the press answers `pending`). */
export const decisionUpdateFallbacks = new Counter({
  name: 'svc_checkout_decision_update_fallbacks_total',
  help: 'Test-gateway decision Updates not taken within their deadline, sent as the signal instead.',
  registers: [registry],
});

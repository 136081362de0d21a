import { countOtp } from '../telemetry/checkout';
import type Router from '@koa/router';
import type { Middleware } from 'koa';
import type { AppDeps } from '../deps';
import { inSnapshot } from '../db/knex';
import { publishableKeyAuth } from '../http/checkout-auth';
import { rateLimit } from '../http/rate-limit';
import { input, validate } from '../http/validate';
import { attemptCreatedOut } from './attempts/attempt-row';
import { streamAttempt } from './attempts/attempt-stream';
import { AttemptStreamHub } from './attempts/attempt-stream-hub';
import { createAttempt } from './attempts/create-attempt';
import { lookupAttempt, pollAttempt } from './attempts/polls';
import { decideTestAttempt, readTestGatewayAttempt } from './attempts/test-gateway';
import { defaultGateways, Gateways } from './gateways';
import { publicLimits } from './public-limits';
import { cancelSession } from './public/cancel-session';
import { updateCustomer } from './public/customer';
import { customerTokenValid } from './public/customer-tokens';
import type { PublicDeps } from './public/deps';
import { requestOtp, verifyOtp } from './public/otp';
import { publicContext, publicSessionOut } from './public/public-session';
import { assertShowable, sessionByCode } from './public/session-lookup';
import { heldOutboxSms, outboxSms, SmsSender } from './public/sms';
import { attemptIn, customerIn, decisionIn, otpRequestIn, otpVerifyIn } from './schemas';

/** Adapters the public routes use; tests swap in failing or unconfigured vendors. */
export interface PublicAdapters {
  gateways?: Gateways;
  sms?: SmsSender;
}

const CUSTOMER_TOKEN_HEADER = 'x-svc-customer-token';

/** Public answers can carry a customer token or a shopper's details: no cache may keep them. */
const noStore: Middleware = async (ctx, next) => {
  await next();
  ctx.set('Cache-Control', 'no-store');
};

/**
 * Adds the public routes the hosted page uses (`/public/*`, publishable key) to the `/v1`
 * router: every one counted against the per-IP limit before the key is looked at.
 */
export function publicRoutes(router: Router, deps: AppDeps, adapters: PublicAdapters = {}): Router {
  const { db, clock, settings } = deps;
  const svc: PublicDeps = {
    db,
    clock,
    temporal: deps.temporal,
    taskQueue: settings.TEMPORAL_TASK_QUEUE,
    publicBaseUrl: settings.PUBLIC_BASE_URL,
    gateways: adapters.gateways ?? defaultGateways,
    sms: adapters.sms ?? outboxSms(db),
    testSms: heldOutboxSms(db),
    otpCountryCodes: settings.OTP_ALLOWED_COUNTRY_CODES,
    testPhone: settings.TEST_PHONE,
    beforeHandoff: deps.beforeHandoff,
  };
  // The process's one LISTEN connection for attempt streams (the app's own, made at the first stream, when the caller gave none).
  let own: AttemptStreamHub | undefined;
  const streams = () => deps.attemptStreams ?? (own ??= new AttemptStreamHub({ db }));
  const perIp = rateLimit(db, clock, 'public-ip', publicLimits.perIp, (ctx) => `public-ip:${ctx.ip}`);
  const pub = [noStore, perIp, publishableKeyAuth(db, clock)];
  const token = (ctx: { get(name: string): string }) => ctx.get(CUSTOMER_TOKEN_HEADER) || undefined;
  const otp = { body: otpRequestIn };
  const verify = { body: otpVerifyIn };
  const customer = { body: customerIn };
  const attempt = { body: attemptIn };
  const decide = { body: decisionIn };

  router.get('/public/sessions/:code', ...pub, async (ctx) => {
    const now = clock();
    // The session, the token and the merchant's methods and rates from one snapshot: one moment.
    ctx.body = await inSnapshot(db, async (trx) => {
      const session = await sessionByCode(trx, ctx.state.checkout, ctx.params.code);
      assertShowable(session, now);
      const withProfile = await customerTokenValid(trx, session.id, token(ctx), now);
      return publicSessionOut(session, await publicContext(trx, session), withProfile);
    });
  });

  router.post('/public/sessions/:code/otp', ...pub, validate(otp), async (ctx) => {
    ctx.status = 202;
    ctx.body = await countOtp('sent', () =>
      requestOtp(svc, ctx.state.checkout, ctx.params.code, input(ctx, otp).body, ctx.ip),
    );
  });

  router.post('/public/sessions/:code/otp/verify', ...pub, validate(verify), async (ctx) => {
    ctx.body = await countOtp('verified', () =>
      verifyOtp(svc, ctx.state.checkout, ctx.params.code, input(ctx, verify).body),
    );
  });

  router.put('/public/sessions/:code/customer', ...pub, validate(customer), async (ctx) => {
    const body = input(ctx, customer).body;
    const result = await updateCustomer(svc, ctx.state.checkout, ctx.params.code, body, token(ctx));
    ctx.body = publicSessionOut(result.session, await publicContext(db, result.session), result.tokenValid);
  });

  router.post('/public/sessions/:code/cancel', ...pub, async (ctx) => {
    const session = await cancelSession(svc, ctx.state.checkout, ctx.params.code);
    ctx.body = publicSessionOut(session, await publicContext(db, session), false);
  });

  router.post('/public/sessions/:code/attempts', ...pub, validate(attempt), async (ctx) => {
    const body = input(ctx, attempt).body;
    const created = await createAttempt(svc, ctx.state.checkout, ctx.params.code, body, token(ctx));
    ctx.status = 201;
    ctx.body = attemptCreatedOut(created.attempt, created.session, created.redirectUrl);
  });

  router.get('/public/sessions/:code/attempts/:attemptId', ...pub, async (ctx) => {
    ctx.body = await pollAttempt(svc, ctx.state.checkout, ctx.params.code, ctx.params.attemptId);
  });

  router.get('/public/sessions/:code/attempts/:attemptId/stream', ...pub, (ctx) =>
    streamAttempt(ctx, streams(), () => pollAttempt(svc, ctx.state.checkout, ctx.params.code, ctx.params.attemptId)),
  );

  router.get('/public/attempts/:attemptId', ...pub, async (ctx) => {
    ctx.body = await lookupAttempt(svc, ctx.state.checkout, ctx.params.attemptId);
  });

  router.get('/public/attempts/:attemptId/stream', ...pub, (ctx) =>
    streamAttempt(ctx, streams(), () => lookupAttempt(svc, ctx.state.checkout, ctx.params.attemptId)),
  );

  router.get('/public/test-gateway/:attemptId', ...pub, async (ctx) => {
    ctx.body = await readTestGatewayAttempt(svc, ctx.state.checkout, ctx.params.attemptId);
  });

  router.post('/public/test-gateway/:attemptId/decide', ...pub, validate(decide), async (ctx) => {
    const { decision } = input(ctx, decide).body;
    ctx.body = await decideTestAttempt(svc, ctx.state.checkout, ctx.params.attemptId, decision);
  });

  return router;
}

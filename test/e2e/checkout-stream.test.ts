import type { Page } from 'playwright-core';
import { attemptSchedule } from '../../src/temporal/session';
import { historyOf, until } from '../helpers/checkout-payments';
import { landedAtMerchant, openSession, orderBody, useShopperWorld } from './shop';

/**
 * The return page hears the attempt's outcome on its event stream (headless Chromium): "paid"
 * arrives pushed, with no poll at all; a stream that drops before the outcome leaves the page
 * polling, and the poll takes the shopper on; a `reconnect` event opens a new stream.
 */
jest.setTimeout(120_000);

const w = useShopperWorld();

const payable = () =>
  openSession(
    w.stack,
    w.shop.secretKey,
    orderBody({ collect: { phone: 'none', name: 'optional', shipping_address: 'none' }, locale: 'en' }),
  );

/** The page's calls on the attempt: the polls (`/attempts/<id>`) and the streams (`/attempts/<id>/stream`). */
function attemptCalls(page: Page) {
  const calls = { polls: 0, streams: 0 };
  page.on('request', (req) => {
    const path = new URL(req.url()).pathname;
    if (/^\/hosted\/api\/public\/attempts\/pa_[A-Za-z0-9_]+$/.test(path)) calls.polls += 1;
    if (/^\/hosted\/api\/public\/attempts\/pa_[A-Za-z0-9_]+\/stream$/.test(path)) calls.streams += 1;
  });
  return calls;
}

/** To the return page with the slow button: the attempt stays pending until the workflow's 90 s timer fires. */
async function pendingOnReturnPage(page: Page): Promise<{ sessionId: string; attemptId: string }> {
  const s = await payable();
  await page.goto(s.url);
  await page.getByRole('radio', { name: 'Test gateway' }).check();
  await page.getByRole('button', { name: 'Pay 27,000 IQD' }).click();
  await page.waitForURL(/\/t\/pa_test_/);
  const attemptId = /\/t\/(pa_[A-Za-z0-9_]+)/.exec(page.url())![1];
  await page.getByRole('button', { name: 'Slow' }).click();
  await page.waitForURL(`**/r/${attemptId}`);
  return { sessionId: s.id, attemptId };
}

/** Fires the slow button's timer on the test server: the amount rule settles the attempt paid. */
async function slowAnswerComes(sessionId: string) {
  const timer = `timer ${attemptSchedule.slowAnswerMs / 1000} s`;
  await until(async () => (await historyOf(w.stack, sessionId)).at(-1)?.startsWith(timer) ?? false, timer);
  await w.stack.env.sleep(attemptSchedule.slowAnswerMs);
}

it('takes the shopper to the merchant when the stream pushes "paid", without polling', async () => {
  const calls = attemptCalls(w.page);
  const streamOpened = w.page.waitForRequest(/\/hosted\/api\/public\/attempts\/pa_[A-Za-z0-9_]+\/stream$/);
  const { sessionId } = await pendingOnReturnPage(w.page);
  await streamOpened;
  await slowAnswerComes(sessionId);
  await landedAtMerchant(w.page, '/done');
  const session = await w.stack.db('checkout_sessions').where({ id: sessionId }).first();
  expect([session.status, session.payment_status]).toEqual(['completed', 'paid']);
  expect(calls).toEqual({ polls: 0, streams: 1 });
});

it('falls back to polling when the stream drops before the outcome, and the poll takes the shopper on', async () => {
  const calls = attemptCalls(w.page);
  // The stream answers the pending attempt, then the connection ends with no outcome and no `reconnect`.
  await w.context.route(/\/hosted\/api\/public\/attempts\/(pa_[A-Za-z0-9_]+)\/stream$/, (route) => {
    const attemptId = /attempts\/(pa_[A-Za-z0-9_]+)\/stream/.exec(route.request().url())![1];
    return route.fulfill({
      status: 200,
      contentType: 'text/event-stream',
      body: `retry: 1000\n\nevent: attempt\ndata: ${JSON.stringify({ attempt_id: attemptId, status: 'pending' })}\n\n`,
    });
  });
  const { sessionId } = await pendingOnReturnPage(w.page);
  await until(async () => calls.polls > 0, 'the page to poll');
  await slowAnswerComes(sessionId);
  await landedAtMerchant(w.page, '/done');
  expect(calls.streams).toBe(1);
  expect(calls.polls).toBeGreaterThan(0);
});

it('opens a new stream after a reconnect event (the stream’s life is over, or its server stops), without polling', async () => {
  const calls = attemptCalls(w.page);
  let served = 0;
  // The first stream answers the pending attempt and ends with `reconnect`; the next ones reach the service.
  await w.context.route(/\/hosted\/api\/public\/attempts\/(pa_[A-Za-z0-9_]+)\/stream$/, (route) => {
    served += 1;
    if (served > 1) return route.continue();
    const attemptId = /attempts\/(pa_[A-Za-z0-9_]+)\/stream/.exec(route.request().url())![1];
    const pending = JSON.stringify({ attempt_id: attemptId, status: 'pending' });
    return route.fulfill({
      status: 200,
      contentType: 'text/event-stream',
      body: `retry: 1000\n\nevent: attempt\ndata: ${pending}\n\nevent: reconnect\ndata: {}\n\n`,
    });
  });
  const { sessionId } = await pendingOnReturnPage(w.page);
  await until(async () => calls.streams === 2, 'the page to open a second stream');
  await slowAnswerComes(sessionId);
  await landedAtMerchant(w.page, '/done');
  expect(calls).toEqual({ polls: 0, streams: 2 });
});

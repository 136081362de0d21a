import { formatMoney } from '../format';
import { Html, html } from '../html';
import { Lang, t } from '../i18n';
import type { AttemptLookup } from '../public-types';
import { screen } from './layout';

/** The return page while the attempt is pending: progress that the page script keeps up to date. */
export function returnPendingContent(lang: Lang, poll: AttemptLookup): Html {
  return html`<section class="screen screen-info" aria-labelledby="screen-title" aria-busy="true" id="return-screen">
    <div class="spinner" aria-hidden="true"></div>
    <h1 id="screen-title" tabindex="-1">${t(lang, 'return_title')}</h1>
    <p class="screen-body" id="return-status" role="status" aria-live="polite">${t(lang, 'return_body')}</p>
    <p class="screen-amount">
      ${t(lang, 'gateway_pay_to', {
        amount: formatMoney(poll.present.amount, poll.present.currency, lang),
        merchant: poll.merchant.display_name,
      })}
    </p>
  </section>`;
}

/** The return page once the payment succeeded: the script (or the link) takes the shopper to the merchant. */
export function returnSucceededContent(lang: Lang, poll: AttemptLookup, redirectTo: string): Html {
  return screen({
    tone: 'ok',
    title: t(lang, 'return_success_title'),
    body: t(lang, 'return_success_body', { merchant: poll.merchant.display_name }),
    action: { href: redirectTo, label: t(lang, 'return_to', { merchant: poll.merchant.display_name }) },
  });
}

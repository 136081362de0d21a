import { formatMoney } from '../format';
import { Html, html } from '../html';
import { Lang, t } from '../i18n';
import type { MessageKey } from '../locales/en';
import type { TestGatewayRead } from '../public-types';

const decisions: Array<{ value: string; label: MessageKey; help: MessageKey; style: string }> = [
  { value: 'succeeded', label: 'gateway_succeed', help: 'gateway_succeed_help', style: 'primary' },
  { value: 'failed', label: 'gateway_fail', help: 'gateway_fail_help', style: 'danger' },
  { value: 'canceled', label: 'gateway_cancel', help: 'gateway_cancel_help', style: 'secondary' },
  { value: 'slow', label: 'gateway_slow', help: 'gateway_slow_help', style: 'secondary' },
];

/** The simulated vendor's page (`/t/<attempt_id>`): four buttons, each a plain form post. */
export function gatewayContent(lang: Lang, read: TestGatewayRead, error: string | null): Html {
  const amount = formatMoney(read.amount, read.currency, lang);
  const undecided = read.status === 'pending';
  return html`<section class="card gateway" aria-labelledby="gateway-title">
    <h1 id="gateway-title">${t(lang, 'gateway_title')}</h1>
    <p>${t(lang, 'gateway_intro')}</p>
    <p class="gateway-amount">${t(lang, 'gateway_pay_to', { amount, merchant: read.merchant.display_name })}</p>
    ${error && html`<div class="alert alert-error" role="alert">${error}</div>`}
    ${
      undecided
        ? html`<form method="post" class="decisions">
            ${decisions.map(
              (d) =>
                html`<div class="decision">
                  <button
                    type="submit"
                    name="decision"
                    value="${d.value}"
                    class="button ${d.style} wide"
                    aria-describedby="help-${d.value}"
                  >
                    ${t(lang, d.label)}
                  </button>
                  <p class="help" id="help-${d.value}">${t(lang, d.help)}</p>
                </div>`,
            )}
          </form>`
        : html`<p>${t(lang, 'gateway_decided')}</p>
            <a class="button primary" href="${new URL(read.return_url).pathname}">${t(lang, 'continue')}</a>`
    }
  </section>`;
}

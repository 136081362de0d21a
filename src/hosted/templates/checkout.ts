import { formatMoney, formatPhone, isolated, ltr } from '../format';
import { Html, html } from '../html';
import { governorates, Lang, t, unavailableMessage } from '../i18n';
import type { MessageKey } from '../locales/en';
import type { Address, Collect, PublicMethod, PublicSession } from '../public-types';

/** What the checkout page (`/c/<code>`) shows. */
export interface CheckoutView {
  lang: Lang;
  session: PublicSession;
  /** Why the last attempt failed, when the return page sent the shopper back here. */
  failure: MessageKey | null;
  /** Test mode: the test phone and its code, for the hint. */
  testPhone: { phone: string; code: string } | null;
}

/** A field's label with "(optional)" when the session does not require it. */
const labelText = (lang: Lang, key: MessageKey, collect: Collect) =>
  collect === 'optional' ? html`${t(lang, key)} <span class="optional">${t(lang, 'optional')}</span>` : t(lang, key);

/** A field's error line, filled in by the page script. */
const fieldError = (id: string) => html`<p class="field-error" id="${id}-error" hidden></p>`;

function summary(view: CheckoutView): Html {
  const { lang, session: s } = view;
  return html`<section class="card summary" aria-labelledby="summary-title">
    <h2 id="summary-title">${t(lang, 'order_summary')}</h2>
    <p class="reference">${t(lang, 'order_reference', { reference: isolated(s.reference_id) })}</p>
    <ul class="items">
      ${s.line_items.map((item) => {
        const line = item.amount * item.quantity * (item.type === 'discount' ? -1 : 1);
        return html`<li class="item item-${item.type}">
          <span class="item-label"
            >${item.label}${item.quantity > 1 && html` <span class="quantity">${ltr(`× ${item.quantity}`)}</span>`}</span
          >
          <span class="item-amount">${formatMoney(line, s.currency, lang)}</span>
        </li>`;
      })}
    </ul>
    <p class="total">
      <span>${t(lang, 'total')}</span>
      <span class="total-amount" id="total-amount">${formatMoney(s.amount, s.currency, lang)}</span>
    </p>
  </section>`;
}

function phoneStep(view: CheckoutView): Html | null {
  const { lang, session: s } = view;
  if (s.collect.phone === 'none') return null;
  const verified = s.profile !== undefined && s.customer.phone_verified && s.customer.phone;
  const hint =
    view.testPhone &&
    html`<p class="hint" id="test-hint">
      ${t(lang, 'test_hint', { phone: ltr(formatPhone(view.testPhone.phone)), code: ltr(view.testPhone.code) })}
    </p>`;
  if (verified) {
    return html`<section class="card" aria-labelledby="phone-title">
      <h2 id="phone-title">${t(lang, 'phone_title')}</h2>
      <p class="verified" id="phone-verified">
        <span aria-hidden="true">✓</span> ${t(lang, 'phone_verified', { phone: ltr(formatPhone(s.customer.phone!)) })}
      </p>
    </section>`;
  }
  const prefill = s.customer.phone ? formatPhone(s.customer.phone).replace(/\u00a0/g, ' ') : '';
  return html`<section class="card" aria-labelledby="phone-title" id="phone-step">
    <h2 id="phone-title">${labelText(lang, 'phone_title', s.collect.phone)}</h2>
    <div id="phone-entry">
      <label for="phone">${t(lang, 'phone_label')}</label>
      <p class="help" id="phone-help">${t(lang, 'phone_help')}</p>
      <div class="row">
        <input
          id="phone"
          name="phone"
          type="tel"
          inputmode="tel"
          autocomplete="tel"
          dir="ltr"
          placeholder="07XX XXX XXXX"
          value="${prefill}"
          aria-describedby="phone-help phone-error"
          ${s.collect.phone === 'required' ? html`required` : ''}
        />
        <button type="button" class="button secondary" id="send-code">${t(lang, 'send_code')}</button>
      </div>
      ${fieldError('phone')}
    </div>
    <div id="code-entry" hidden>
      <label for="otp">${t(lang, 'code_label')}</label>
      <p class="help" id="otp-help"></p>
      <div class="row">
        <input
          id="otp"
          name="otp"
          type="text"
          inputmode="numeric"
          autocomplete="one-time-code"
          dir="ltr"
          maxlength="6"
          aria-describedby="otp-help otp-error"
        />
        <button type="button" class="button secondary" id="verify-code">${t(lang, 'verify')}</button>
      </div>
      ${fieldError('otp')}
      <p class="resend">
        <span id="resend-wait" aria-live="polite"></span>
        <button type="button" class="link" id="resend" hidden>${t(lang, 'resend')}</button>
        <button type="button" class="link" id="change-phone">${t(lang, 'change_phone')}</button>
      </p>
    </div>
    ${hint}
  </section>`;
}

function addressFields(lang: Lang, collect: Collect, address: Address | null): Html {
  const req = collect === 'required' ? html`required` : '';
  const a = address;
  const known = governorates.some((g) => g.en === a?.governorate);
  return html`<fieldset class="address">
    <legend>${labelText(lang, 'address_title', collect)}</legend>
    <label for="governorate">${t(lang, 'governorate_label')}</label>
    <select
      id="governorate"
      name="governorate"
      autocomplete="address-level1"
      aria-describedby="governorate-error"
      ${req}
    >
      <option value="">${t(lang, 'choose')}</option>
      ${!known && a?.governorate && html`<option value="${a.governorate}" selected>${a.governorate}</option>`}
      ${governorates.map(
        (g) => html`<option value="${g.en}" ${a?.governorate === g.en ? html`selected` : ''}>${g[lang]}</option>`,
      )}
    </select>
    ${fieldError('governorate')} ${addressLine(lang, 'city', 'city_label', 'address-level2', 100, a?.city, req)}
    ${addressLine(lang, 'line', 'line_label', 'street-address', 300, a?.line, req)}
    <label for="landmark">${t(lang, 'landmark_label')} <span class="optional">${t(lang, 'optional')}</span></label>
    <input id="landmark" name="landmark" maxlength="300" value="${a?.landmark ?? ''}" />
  </fieldset>`;
}

function detailsStep(view: CheckoutView): Html | null {
  const { lang, session: s } = view;
  if (s.collect.name === 'none' && s.collect.shipping_address === 'none') return null;
  const name = s.customer.name ?? s.profile?.name ?? '';
  const address = s.customer.address ?? s.profile?.addresses[0] ?? null;
  return html`<section class="card" aria-labelledby="details-title">
    <h2 id="details-title">${t(lang, 'details_title')}</h2>
    ${
      s.collect.name !== 'none' &&
      html`<label for="name">${labelText(lang, 'name_label', s.collect.name)}</label>
        <input
          id="name"
          name="name"
          autocomplete="name"
          maxlength="120"
          value="${name}"
          aria-describedby="name-error"
          ${s.collect.name === 'required' ? html`required` : ''}
        />
        ${fieldError('name')}`
    }
    ${s.collect.shipping_address !== 'none' && addressFields(lang, s.collect.shipping_address, address)}
  </section>`;
}

/** What a method asks to pay, as the pay button says it. */
function payLabel(lang: Lang, s: PublicSession, m: PublicMethod): string {
  if (m.flow === 'offline') return t(lang, 'place_order');
  return t(lang, 'pay', {
    amount: formatMoney(m.presented_amount ?? s.amount, m.presented_currency ?? s.currency, lang),
  });
}

function methodNote(lang: Lang, s: PublicSession, m: PublicMethod): string | null {
  if (!m.available) return t(lang, unavailableMessage(m.unavailable_reason));
  if (m.flow === 'offline') return t(lang, 'cod_hint');
  if (m.presented_currency && m.presented_currency !== s.currency && m.presented_amount !== null) {
    return t(lang, 'you_pay', { amount: formatMoney(m.presented_amount, m.presented_currency, lang) });
  }
  return null;
}

function methodsStep(view: CheckoutView, selected: PublicMethod | undefined): Html {
  const { lang, session: s } = view;
  return html`<fieldset class="card methods" aria-describedby="method-error">
    <legend><h2>${t(lang, 'method_title')}</h2></legend>
    <div class="method-list">
      ${s.methods.map((m) => {
        const note = methodNote(lang, s, m);
        return html`<label class="method${m.available ? '' : ' unavailable'}">
          <input
            type="radio"
            name="method"
            value="${m.code}"
            data-flow="${m.flow}"
            data-pay-label="${payLabel(lang, s, m)}"
            ${note ? html`aria-describedby="method-note-${m.code}"` : ''}
            ${m.available ? '' : html`disabled`}
            ${m === selected ? html`checked` : ''}
          />
          <span class="method-name">${m.display_name[lang]}</span>
          ${note && html`<span class="method-note" id="method-note-${m.code}">${note}</span>`}
        </label>`;
      })}
    </div>
    ${fieldError('method')}
  </fieldset>`;
}

/** The checkout page's content: summary, the steps the session collects, methods, pay and cancel. */
export function checkoutContent(view: CheckoutView): Html {
  const { lang, session: s } = view;
  const selected = s.methods.find((m) => m.available);
  return html`<h1 class="page-title" id="page-title" tabindex="-1">${t(lang, 'checkout_title')}</h1>
    ${
      view.failure &&
      html`<div class="alert alert-error" id="failure" role="alert">
        <strong>${t(lang, 'failed_title')}</strong>
        <p>${t(lang, view.failure)}</p>
      </div>`
    }
    <div class="layout">
      ${summary(view)}
      <form class="pay-form" id="checkout" novalidate>
        ${phoneStep(view)} ${detailsStep(view)} ${methodsStep(view, selected)}
        <div class="alert alert-error" id="form-error" role="alert" hidden></div>
        <noscript><p class="alert alert-error">${t(lang, 'no_script')}</p></noscript>
        <button type="submit" class="button primary wide" id="pay">
          ${selected ? payLabel(lang, s, selected) : t(lang, 'pay', { amount: formatMoney(s.amount, s.currency, lang) })}
        </button>
        <div class="cancel">
          <button type="button" class="link" id="cancel" aria-expanded="false" aria-controls="cancel-confirm">
            ${t(lang, s.cancel_url ? 'cancel_to_store' : 'cancel_payment')}
          </button>
          <div id="cancel-confirm" class="confirm" hidden>
            <p id="cancel-question">${t(lang, 'cancel_confirm')}</p>
            <div class="row">
              <button type="button" class="button danger" id="cancel-yes">${t(lang, 'cancel_yes')}</button>
              <button type="button" class="button secondary" id="cancel-no">${t(lang, 'cancel_no')}</button>
            </div>
          </div>
        </div>
      </form>
    </div>
    <p class="footer-note">${t(lang, 'secure_footer', { merchant: s.merchant.display_name })}</p>`;
}

/** A labelled text input of the address with its error slot. */
function addressLine(
  lang: Lang,
  name: 'city' | 'line',
  label: MessageKey,
  autocomplete: string,
  maxlength: number,
  value: string | undefined,
  req: Html | string,
): Html {
  return html`<label for="${name}">${t(lang, label)}</label>
    <input
      id="${name}"
      name="${name}"
      autocomplete="${autocomplete}"
      maxlength="${maxlength}"
      value="${value ?? ''}"
      aria-describedby="${name}-error"
      ${req}
    />
    ${fieldError(name)}`;
}

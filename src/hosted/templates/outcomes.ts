import { formatMoney, isolated } from '../format';
import { Html, html } from '../html';
import { Lang, t } from '../i18n';
import type { AttemptPoll, PublicSession } from '../public-types';
import { screen } from './layout';

/**
 * A session that was paid (or confirmed for cash on delivery): what was agreed, and the way back
 * to the merchant's success URL when this browser knows the attempt.
 */
export function completedContent(lang: Lang, session: PublicSession, attempt: AttemptPoll | null): Html {
  const merchant = session.merchant.display_name;
  const offline = session.payment_status === 'requires_offline_collection';
  const amount = formatMoney(
    attempt?.present.amount ?? session.amount,
    attempt?.present.currency ?? session.currency,
    lang,
  );
  return screen({
    tone: 'ok',
    title: t(lang, offline ? 'cod_title' : 'paid_title'),
    body: offline ? t(lang, 'cod_body', { amount }) : t(lang, 'paid_body', { amount, merchant }),
    extra: html`<p class="reference">${t(lang, 'order_reference', { reference: isolated(session.reference_id) })}</p>`,
    action: attempt?.redirect_to ? { href: attempt.redirect_to, label: t(lang, 'return_to', { merchant }) } : null,
  });
}

/** A payment is with the provider: never a second form, only the way to its status. */
export function processingContent(lang: Lang, statusHref: string): Html {
  return screen({
    tone: 'info',
    title: t(lang, 'processing_title'),
    body: t(lang, 'processing_body'),
    action: { href: statusHref, label: t(lang, 'check_status') },
  });
}

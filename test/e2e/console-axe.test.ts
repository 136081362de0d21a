import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { langs } from '../../src/hosted/i18n';
import { randomString } from '../../src/lib/ids';
import { rejectProduct } from '../../src/ops/product-review';
import { createPartnerKey } from '../../src/ops/partner-keys';
import { createSeller } from '../../src/ops/sellers';
import { paidSession } from '../helpers/checkout-payments';
import { consoleUser, TestConsoleUser } from '../helpers/console';
import { call } from '../helpers/http';
import { ops, seedProducts } from '../helpers/partner';
import { until, webhookSteps } from '../helpers/webhooks';
import { ConsoleAccount, ConsoleTab, expectGoodPage, openTab, shoot, signIn, useConsoleEnv } from './console';

/**
 * axe-core on every GET page of the console (docs/console.md's table) in Arabic, Kurdish and
 * English, at phone width, for a seller's owner and a merchant's owner (who see every page of
 * their kind) with data on each page: no violation of impact serious or critical. The pages come
 * from PAGES below, which must name every GET row of docs/console.md.
 */
jest.setTimeout(600_000);

interface Fixtures {
  invitePath: string;
  productId: string;
  variantId: string;
  orderId: string;
  sessionId: string;
  endpointId: string;
}

/**
 * Who opens a page: signed out, after the password step only, or signed in as a seller's user, a
 * merchant's user, or either.
 */
type Who = 'signed out' | 'password step' | 'seller' | 'merchant' | 'both';

/**
 * Every GET page of the console: its URL as docs/console.md's table writes it (without the
 * query), who opens it, and the URL to open. A new page is one line here; the first test fails
 * while a GET row of the table is missing.
 */
const PAGES: ReadonlyArray<readonly [route: string, who: Who, url: (f: Fixtures) => string]> = [
  ['/console', 'both', () => '/console'],
  ['/console/sign-in', 'signed out', () => '/console/sign-in'],
  ['/console/sign-in/verify', 'password step', () => '/console/sign-in/verify'],
  ['/console/invite/{token}', 'signed out', (f) => f.invitePath],
  ['/console/reauth', 'both', () => '/console/reauth?next=%2Fconsole%2Faccount%2Fsessions'],
  ['/console/account/security', 'both', () => '/console/account/security'],
  ['/console/account/sessions', 'both', () => '/console/account/sessions'],
  ['/console/audit', 'both', () => '/console/audit'],
  ['/console/settings/users', 'both', () => '/console/settings/users'],
  ['/console/settings/integrations', 'seller', () => '/console/settings/integrations'],
  ['/console/products', 'seller', () => '/console/products'],
  ['/console/products/{product_id}', 'seller', (f) => `/console/products/${f.productId}`],
  ['/console/orders', 'seller', () => '/console/orders'],
  ['/console/orders/{order_id}', 'seller', (f) => `/console/orders/${f.orderId}`],
  ['/console/inventory', 'seller', () => '/console/inventory'],
  ['/console/inventory/{variant_id}', 'seller', (f) => `/console/inventory/${f.variantId}`],
  ['/console/payments', 'merchant', () => '/console/payments'],
  ['/console/payments/{session_id}', 'merchant', (f) => `/console/payments/${f.sessionId}`],
  ['/console/developers/webhooks', 'merchant', () => '/console/developers/webhooks'],
  ['/console/developers/webhooks/{endpoint_id}', 'merchant', (f) => `/console/developers/webhooks/${f.endpointId}`],
  ['/console/developers/events', 'merchant', () => '/console/developers/events'],
  ['/console/developers/keys', 'merchant', () => '/console/developers/keys'],
];

/** The URLs (query left out) of docs/console.md's table rows whose method includes GET. */
function documentedPages(): string[] {
  const doc = readFileSync(join(__dirname, '..', '..', 'docs', 'console.md'), 'utf8');
  return doc
    .split('\n')
    .map((line) => /^\| `(\/console[^`]*)` \| ([^|]+) \|/.exec(line))
    .filter((m): m is RegExpExecArray => m !== null && m[2].split(',').some((method) => method.trim() === 'GET'))
    .map((m) => m[1].split('?')[0]);
}

const env = useConsoleEnv();
const steps = webhookSteps(() => env.stack);
let fixtures: Fixtures;
let sellerOwner: TestConsoleUser;
let merchantOwner: TestConsoleUser;

beforeAll(async () => {
  // A seller with a Partner key, a rejected product, a pending order and a second user.
  const seller = await createSeller(env.stack.db, { name: `Axe seller ${randomString(6)}`, locations: 1 });
  await createPartnerKey(env.stack.db, { sellerId: seller.seller_id, env: 'test', scopes: ['orders:read'] });
  const [product] = await seedProducts(env.stack.db, seller.seller_id, 1, { status: 'proposed', stock: 5 });
  await rejectProduct(env.stack.db, product.id, 'The photos are missing.');
  const order = await ops(env.stack.db, 'order', 'create', '--seller', seller.seller_id, '--items', `${product.sku}:1`);
  sellerOwner = await consoleUser(env.stack, { sellerId: seller.seller_id }, 'owner');
  await consoleUser(env.stack, { sellerId: seller.seller_id }, 'viewer');
  const invite = await ops(
    env.stack.db,
    'console-user',
    'invite',
    '--seller',
    seller.seller_id,
    '--email',
    `new-${randomString(6)}@shop.example`,
    '--role',
    'operator',
  );

  // A merchant with an endpoint whose deliveries fail, a paid session partly refunded, and a second user.
  const merchant = await steps.webhookMerchant();
  const path = `/axe-${randomString(8)}`;
  env.receiver.respond = (r) => (r.path === path ? { status: 500, body: '<b>Receiver down</b>' } : { status: 200 });
  const endpoint = await steps.createEndpoint(merchant.secretKey, env.receiver.url(path));
  const session = await paidSession(env.stack, merchant);
  const refund = await call(env.stack.baseUrl, 'POST', '/v1/refunds', {
    key: merchant.secretKey,
    idempotencyKey: `idem_${randomString(16)}`,
    body: { session_id: session.id, amount: 2500, reason: 'One item missing' },
  });
  expect(refund.status).toBe(201);
  await until(
    () => env.stack.db('event_deliveries').where({ endpoint_id: endpoint.id, status_code: 500 }),
    (rows) => rows.length > 0,
    'a failed delivery',
  );
  merchantOwner = await consoleUser(env.stack, { merchantId: merchant.merchantId }, 'owner');
  await consoleUser(env.stack, { merchantId: merchant.merchantId }, 'developer');

  fixtures = {
    invitePath: new URL(invite.link).pathname,
    productId: product.id,
    variantId: product.variantId,
    orderId: order.order_id,
    sessionId: session.id,
    endpointId: endpoint.id,
  };
});

it('opens every GET page docs/console.md lists, and only those', () => {
  const listed = PAGES.map(([route]) => route);
  const documented = documentedPages();
  expect(documented.length).toBeGreaterThan(15);
  expect({
    missingHere: documented.filter((route) => !listed.includes(route)),
    notInTheDocs: listed.filter((route) => !documented.includes(route)),
  }).toEqual({ missingHere: [], notInTheDocs: [] });
});

const account = (user: TestConsoleUser): ConsoleAccount => ({ ...user, userId: user.id });

/** Opens each page of `who` in the tab and checks it (language, direction, axe). */
async function check(tab: ConsoleTab, ...who: Who[]): Promise<void> {
  for (const [, , url] of PAGES.filter(([, w]) => who.includes(w))) {
    await tab.page.goto(env.stack.baseUrl + url(fixtures));
    await expectGoodPage(tab);
  }
}

it.each(langs)('every page in %s has no serious or critical axe violation', async (lang) => {
  const seller = await openTab(env, lang);
  await check(seller, 'signed out');
  await signIn(env, seller, account(sellerOwner), 'code', { onVerify: () => check(seller, 'password step') });
  await check(seller, 'seller', 'both');
  if (lang === 'ku') {
    await seller.page.goto(`${env.stack.baseUrl}/console/settings/integrations`);
    await shoot(seller, 'integrations', ['desktop']);
  }
  expect(seller.problems).toEqual([]);
  await seller.context.close();

  const merchant = await openTab(env, lang);
  await signIn(env, merchant, account(merchantOwner), 'code');
  await check(merchant, 'merchant', 'both');
  expect(merchant.problems).toEqual([]);
  await merchant.context.close();
});

import { readFileSync } from 'node:fs';
import type { Middleware } from 'koa';
import { checkoutDocument } from './checkout';
import { partnerDocument } from './partner';

/** Each document is generated once per process, on first request. */
function once<T>(make: () => T): () => T {
  let value: T | undefined;
  return () => (value ??= make());
}

export const servedPartnerDocument = once(partnerDocument);
export const servedCheckoutDocument = once(checkoutDocument);

/** The Scalar API reference, bundled from npm (nothing is loaded from a CDN at run time). */
const scalarBundle = once(() => readFileSync(require.resolve('@scalar/api-reference/browser/standalone.js')));

const page = `<!doctype html>
<html lang="en">
<head>
<meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<title>API reference: Checkout API and Seller Partner API</title>
</head>
<body>
<div id="app"></div>
<script src="/docs/scalar.js"></script>
<script src="/docs/init.js"></script>
</body>
</html>
`;

const init = `Scalar.createApiReference('#app', {
  sources: [
    { title: 'Checkout API', slug: 'checkout', url: '/v1/openapi.json' },
    { title: 'Seller Partner API', slug: 'partner', url: '/partner/v1/openapi.json' },
  ],
  withDefaultFonts: false,
  hideClientButton: true,
  showDeveloperTools: 'never',
  agent: { disabled: true, hideAddApi: true },
  documentDownloadType: 'json',
  telemetry: false,
});
`;

/** Same-origin only: the bundle, its config and the two documents; styles inline as the bundle injects them. */
const CSP = [
  "default-src 'self'",
  "script-src 'self'",
  "style-src 'self' 'unsafe-inline'",
  "img-src 'self' data:",
  "font-src 'self' data:",
  "connect-src 'self'",
  "frame-ancestors 'none'",
  "base-uri 'none'",
  "form-action 'none'",
].join('; ');

/** `GET /docs`: the reference page for both APIs, rendered in the browser from the served OpenAPI documents. */
export const docsPage: Middleware = async (ctx, next) => {
  if (ctx.method !== 'GET' && ctx.method !== 'HEAD') return next();
  const asset =
    ctx.path === '/docs' || ctx.path === '/docs/'
      ? { type: 'text/html; charset=utf-8', body: page }
      : ctx.path === '/docs/init.js'
        ? { type: 'text/javascript; charset=utf-8', body: init }
        : ctx.path === '/docs/scalar.js'
          ? { type: 'text/javascript; charset=utf-8', body: scalarBundle() }
          : null;
  if (!asset) return next();
  ctx.set('Content-Security-Policy', CSP);
  ctx.set('X-Content-Type-Options', 'nosniff');
  ctx.set('Cache-Control', 'public, max-age=300');
  ctx.type = asset.type;
  ctx.body = asset.body;
};

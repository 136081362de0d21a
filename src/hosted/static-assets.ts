import { createHash } from 'node:crypto';
import { readFileSync } from 'node:fs';
import { dirname, join } from 'node:path';
import type { Middleware } from 'koa';

/**
 * The hosted pages' stylesheet and script, the console's stylesheet and passkey script, and
 * `@simplewebauthn/browser`'s browser bundle (read from the installed package, so it is the
 * version package-lock.json pins), served from `/hosted/static/`.
 */
const files = {
  'checkout.css': 'text/css; charset=utf-8',
  'checkout.js': 'text/javascript; charset=utf-8',
  'console.css': 'text/css; charset=utf-8',
  'console-passkeys.js': 'text/javascript; charset=utf-8',
  'simplewebauthn-browser.js': 'text/javascript; charset=utf-8',
} as const;
export type AssetName = keyof typeof files;

/** Where an asset's file is: our own under `static/`, a package's bundle where npm put it. */
function assetPath(name: AssetName): string {
  if (name === 'simplewebauthn-browser.js') {
    // The package's exports name only its modules; the bundle sits beside them (dist/bundle).
    const main = require.resolve('@simplewebauthn/browser');
    return join(dirname(main), '..', 'dist', 'bundle', 'index.umd.min.js');
  }
  return join(__dirname, 'static', name);
}

interface Asset {
  body: Buffer;
  type: string;
  /** A short content hash: the URL's version and the ETag. */
  version: string;
}

let loaded: Map<string, Asset> | null = null;

/** Read once, on first use: the files never change while the process runs. */
function assets(): Map<string, Asset> {
  loaded ??= new Map(
    Object.entries(files).map(([name, type]) => {
      const body = readFileSync(assetPath(name as AssetName));
      return [name, { body, type, version: createHash('sha256').update(body).digest('hex').slice(0, 12) }];
    }),
  );
  return loaded;
}

export const STATIC_PREFIX = '/hosted/static/';

/** The versioned address of an asset; a new version is a new URL, so browsers may cache each for a year. */
export const assetUrl = (name: AssetName): string => `${STATIC_PREFIX}${name}?v=${assets().get(name)!.version}`;

/** Serves `/hosted/static/<name>`; anything else there is a 404. */
export const serveStatic: Middleware = async (ctx, next) => {
  if (!ctx.path.startsWith(STATIC_PREFIX)) return next();
  const asset =
    ctx.method === 'GET' || ctx.method === 'HEAD' ? assets().get(ctx.path.slice(STATIC_PREFIX.length)) : null;
  if (!asset) {
    ctx.status = 404;
    ctx.type = 'text/plain';
    ctx.body = 'Not found';
    return;
  }
  const etag = `"${asset.version}"`;
  ctx.set('ETag', etag);
  ctx.set(
    'Cache-Control',
    ctx.query.v === asset.version ? 'public, max-age=31536000, immutable' : 'public, max-age=300',
  );
  ctx.set('X-Content-Type-Options', 'nosniff');
  if (ctx.get('if-none-match') === etag) {
    ctx.status = 304;
    return;
  }
  ctx.type = asset.type;
  ctx.body = asset.body;
};

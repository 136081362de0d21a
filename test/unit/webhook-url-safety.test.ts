import { checkWebhookUrl, isPublicAddress, Resolver } from '../../src/webhooks/url-safety';

/** URL safety rules with a table resolver (no DNS): each refusal has its stable issue token. */
const table: Record<string, string[]> = {
  'shop.example.com': ['93.184.215.14'],
  'loopback.example.com': ['127.0.0.1'],
  'v6.example.com': ['::1'],
  'mixed.example.com': ['93.184.215.14', '10.0.0.7'],
  'dev.example.com': ['127.0.0.1'],
  localhost: ['127.0.0.1', '::1'],
};
const resolve: Resolver = async (host) => {
  if (table[host]) return table[host];
  throw Object.assign(new Error(`getaddrinfo ENOTFOUND ${host}`), { code: 'ENOTFOUND' });
};
const check = (url: string, allowedHosts: string[] = []) => checkWebhookUrl(url, { allowedHosts, resolve });
const issue = async (url: string, allowedHosts: string[] = []) => {
  const r = await check(url, allowedHosts);
  return r.ok ? 'ok' : r.issue;
};

it('accepts an https URL whose host resolves to public addresses, pinned to the address it checked', async () => {
  const r = await check('https://shop.example.com/hooks?x=1');
  expect(r).toMatchObject({ ok: true, target: { host: 'shop.example.com', address: '93.184.215.14', family: 4 } });
});

it('requires https', async () => {
  expect(await issue('http://shop.example.com/hooks')).toBe('https_required');
  expect(await issue('ftp://shop.example.com/')).toBe('https_required');
  expect(await issue('not a url')).toBe('https_required');
});

it('refuses credentials in the URL', async () => {
  expect(await issue('https://user:pw@shop.example.com/')).toBe('credentials');
  expect(await issue('https://user@shop.example.com/')).toBe('credentials');
});

it('refuses localhost, .localhost, .local and .internal names without resolving them', async () => {
  for (const url of [
    'https://localhost/',
    'https://LOCALHOST./',
    'https://api.localhost/',
    'https://printer.local/',
    'https://metadata.google.internal/',
  ]) {
    expect(await issue(url)).toBe('private_target');
  }
});

it('refuses private, loopback, link-local and other special addresses, literal or resolved', async () => {
  for (const url of [
    'https://127.0.0.1/',
    'https://2130706433/',
    'https://10.1.2.3/',
    'https://172.16.0.1/',
    'https://192.168.1.1/',
    'https://169.254.169.254/latest/meta-data',
    'https://100.64.0.1/',
    'https://0.0.0.0/',
    'https://[::1]/',
    'https://[::ffff:127.0.0.1]/',
    'https://[fe80::1]/',
    'https://[fd00::1]/',
    'https://loopback.example.com/',
    'https://v6.example.com/',
  ]) {
    expect(await issue(url)).toBe('private_target');
  }
});

it('refuses IPv4 written inside IPv6: IPv4-compatible (::/96) and IPv4-translated (::ffff:0:0:0/96)', async () => {
  for (const url of [
    'https://[::7f00:1]/',
    'https://[::127.0.0.1]/',
    'https://[::a00:1]/',
    'https://[::808:808]/',
    'https://[::ffff:0:7f00:1]/',
    'https://[::ffff:0:a00:1]/',
    'https://[::ffff:0:808:808]/',
  ]) {
    expect(await issue(url)).toBe('private_target');
  }
  expect(isPublicAddress('::7f00:1')).toBe(false);
  expect(isPublicAddress('::ffff:0:7f00:1')).toBe(false);
});

it('refuses a name when any of its addresses is private', async () => {
  expect(await issue('https://mixed.example.com/')).toBe('private_target');
});

it('refuses a name that does not resolve', async () => {
  expect(await issue('https://nowhere.example.com/')).toBe('unresolvable');
});

it('lets allow-listed hosts through to any address', async () => {
  expect(await issue('https://dev.example.com/', ['dev.example.com'])).toBe('ok');
  expect(await issue('https://localhost/', ['localhost'])).toBe('ok');
  expect(await issue('http://dev.example.com/', ['dev.example.com'])).toBe('https_required');
});

it('classifies public and non-public addresses', () => {
  expect(isPublicAddress('8.8.8.8')).toBe(true);
  expect(isPublicAddress('2606:4700:4700::1111')).toBe(true);
  expect(isPublicAddress('203.0.113.9')).toBe(false);
  expect(isPublicAddress('224.0.0.1')).toBe(false);
  expect(isPublicAddress('not-an-ip')).toBe(false);
});

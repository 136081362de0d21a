import { apiOf } from '../../src/telemetry/http';
import { webhookAttemptOutcome } from '../../src/telemetry/webhooks';

/** Metric labels come from small fixed sets: every input maps onto one of them. */
describe('webhookAttemptOutcome', () => {
  it.each([
    [200, null, 'delivered'],
    [204, null, 'delivered'],
    [301, 'http_301', 'redirect'],
    [404, 'http_404', 'http_4xx'],
    [410, 'http_410', 'http_4xx'],
    [500, 'http_500', 'http_5xx'],
    [503, 'http_503', 'http_5xx'],
    [null, 'timeout', 'timeout'],
    [null, 'private_target', 'refused'],
    [null, 'https_required', 'refused'],
    [null, 'unresolvable', 'refused'],
    [null, 'connection_refused', 'network'],
    [null, 'tls_error', 'network'],
    [null, 'network_error', 'network'],
  ])('status %p with error %p is %s', (status, error, outcome) => {
    expect(webhookAttemptOutcome(status, error)).toBe(outcome);
  });
});

describe('apiOf', () => {
  it.each([
    ['/partner/v1/products/bulk', 'partner'],
    ['/v1/checkout/sessions', 'checkout'],
    ['/v1/public/sessions/abc/otp', 'public'],
    ['/c/abc', 'hosted'],
    ['/hosted/static/app.js', 'hosted'],
    ['/console/orders', 'console'],
    ['/docs', 'other'],
    ['/v10/x', 'other'],
    ['/partnerx', 'other'],
  ])('%s belongs to %s', (path, api) => {
    expect(apiOf(path)).toBe(api);
  });
});

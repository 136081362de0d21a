import { durationSeconds, readAlertRules } from '../../scripts/chaos/alerting';

describe("the fault suite's reading of ops/prometheus/alerts.yml", () => {
  it('reads Prometheus durations in seconds', () => {
    expect(durationSeconds('3m')).toBe(180);
    expect(durationSeconds('1m30s')).toBe(90);
    expect(durationSeconds('6h')).toBe(21_600);
    expect(durationSeconds(undefined)).toBe(0);
  });

  it('gives each alert its for and severity, as the file says', () => {
    const rules = readAlertRules();
    expect(rules.get('DependencyUnavailable')).toEqual({ name: 'DependencyUnavailable', forS: 180, severity: 'page' });
    expect(rules.get('ScrapeTargetDown')).toEqual({ name: 'ScrapeTargetDown', forS: 300, severity: 'ticket' });
    expect(rules.has('api:svc_http_5xx:ratio_rate5m')).toBe(false);
  });
});

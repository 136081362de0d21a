import { durationSeconds, conditionDelayS, readAlertRules } from '../../scripts/chaos/alerting';

describe("the fault suite's reading of ops/prometheus/alerts.yml", () => {
  it('reads Prometheus durations in seconds', () => {
    expect(durationSeconds('3m')).toBe(180);
    expect(durationSeconds('1m30s')).toBe(90);
    expect(durationSeconds('6h')).toBe(21_600);
    expect(durationSeconds(undefined)).toBe(0);
  });

  it('reads how long a condition over a window must hold before it is true', () => {
    expect(conditionDelayS('max_over_time(svc_dependency_up{dependency="postgres"}[20s]) == 0')).toBe(20);
    expect(conditionDelayS('avg_over_time(a[1m]) < 0.5 and max_over_time(b[30s]) == 0')).toBe(60);
    expect(conditionDelayS('sum(increase(svc_claims_fenced_total[5m])) > 0')).toBe(0);
  });

  it('gives each alert its for and severity, as the file says', () => {
    const rules = readAlertRules();
    expect(rules.get('DependencyUnavailable')).toEqual({
      name: 'DependencyUnavailable',
      forS: 180,
      holdS: 180,
      lingerS: 300,
      severity: 'page',
    });
    expect(rules.get('ScrapeTargetDown')).toEqual({
      name: 'ScrapeTargetDown',
      forS: 300,
      holdS: 300,
      lingerS: 0,
      severity: 'ticket',
    });
    expect(rules.get('PostgresUnreachable')).toMatchObject({ forS: 10, holdS: 25, lingerS: 0, severity: 'page' });
    expect(rules.get('PostgresDiskFull')).toMatchObject({ forS: 0, holdS: 0, lingerS: 120 });
    expect(rules.has('api:svc_http_5xx:ratio_rate5m')).toBe(false);
  });
});

import { execFile } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { promisify } from 'node:util';
import { parse } from 'yaml';

// The alert rules, their promtool unit tests and the Grafana dashboard under ops/, checked with
// Debian's promtool (npm test installs the prometheus package for telemetry-*.test.ts files).

const root = join(__dirname, '..', '..');
const rulesPath = join(root, 'ops', 'prometheus', 'alerts.yml');
const rulesTestPath = join(root, 'ops', 'prometheus', 'alerts.test.yml');
const dashboardPath = join(root, 'ops', 'grafana', 'payments.json');
const runbooksPath = join(root, 'docs', 'operations.md');
const promtool = process.env.PROMTOOL_PATH ?? '/usr/bin/promtool';

interface Rule {
  alert?: string;
  record?: string;
  expr: string;
  labels?: Record<string, string>;
  annotations?: Record<string, string>;
}
interface RuleTest {
  alertname: string;
  exp_alerts?: unknown[];
}
interface Contract {
  metrics: { name: string; type: 'counter' | 'gauge' | 'histogram' }[];
}
interface Target {
  expr: string;
}
interface Panel {
  id: number;
  type: string;
  title: string;
  datasource?: { uid: string };
  targets?: (Target & { datasource?: { uid: string } })[];
}
interface Dashboard {
  panels: Panel[];
  templating: { list: { name: string; type: string; query: string | { query: string } }[] };
}

const rules: Rule[] = (parse(readFileSync(rulesPath, 'utf8')) as { groups: { rules: Rule[] }[] }).groups.flatMap(
  (g) => g.rules,
);
const alerts = rules.filter((r) => r.alert !== undefined);
const recorded = new Set(rules.flatMap((r) => (r.record ? [r.record] : [])));
const ruleTests: RuleTest[] = (
  parse(readFileSync(rulesTestPath, 'utf8')) as { tests: { alert_rule_test?: RuleTest[] }[] }
).tests.flatMap((t) => t.alert_rule_test ?? []);
const dashboard = JSON.parse(readFileSync(dashboardPath, 'utf8')) as Dashboard;
const queryPanels = dashboard.panels.filter((p) => p.type !== 'row');

/** Every series name the contract allows: a histogram's three series, Prometheus's `up`, and the recording rules. */
function exportedNames(): Set<string> {
  const contract = JSON.parse(readFileSync(join(root, 'ops', 'metrics.json'), 'utf8')) as Contract;
  const names = contract.metrics.flatMap((m) =>
    m.type === 'histogram' ? [`${m.name}_bucket`, `${m.name}_sum`, `${m.name}_count`] : [m.name],
  );
  return new Set([...names, 'up', ...recorded]);
}

const PROMQL_KEYWORDS = new Set(['and', 'or', 'unless', 'bool', 'offset']);

/**
 * The series names a PromQL expression reads: what is left once strings, label matchers, ranges
 * and grouping clauses are removed, minus function and aggregation names (followed by a
 * parenthesis) and keywords. Grafana variables must be replaced first.
 */
function seriesNames(expr: string): string[] {
  const bare = expr
    .replace(/"(?:[^"\\]|\\.)*"/g, '""')
    .replace(/\{[^}]*\}/g, ' ')
    .replace(/\[[^\]]*\]/g, ' ')
    .replace(/\b(by|without|on|ignoring|group_left|group_right)\s*\([^)]*\)/g, ' ');
  const names = [...bare.matchAll(/(?<![\w.:])([a-zA-Z_:][\w:]*)(\s*\()?/g)].flatMap(([, name, call]) =>
    call || PROMQL_KEYWORDS.has(name) ? [] : [name],
  );
  return [...new Set(names)];
}

/** A dashboard expression with Grafana's variables replaced by what Grafana would send. */
function resolveVariables(expr: string): string {
  return expr.replace(/\$__rate_interval|\$__interval/g, '5m').replace(/\$\{?api\}?/g, '.*');
}

/** GitHub's anchor for a Markdown heading. */
function anchor(heading: string): string {
  return heading
    .trim()
    .toLowerCase()
    .replace(/[^\w\- ]/g, '')
    .replace(/ /g, '-');
}

const run = promisify(execFile);

/** Runs promtool; resolves with its output, or rejects with it (promtool prints why on stdout). */
async function promtoolRun(...args: string[]): Promise<string> {
  try {
    const { stdout, stderr } = await run(promtool, args, { cwd: root });
    return stdout + stderr;
  } catch (error) {
    const e = error as { stdout?: string; stderr?: string; message: string };
    throw new Error(`promtool ${args.join(' ')} failed:\n${e.stdout ?? ''}${e.stderr ?? ''}${e.message}`);
  }
}

describe('Prometheus alert rules (ops/prometheus/alerts.yml)', () => {
  it('pass promtool check rules', async () => {
    expect(await promtoolRun('check', 'rules', rulesPath)).toContain(`SUCCESS: ${rules.length} rules found`);
  });

  it('pass their promtool unit tests (ops/prometheus/alerts.test.yml)', async () => {
    expect(await promtoolRun('test', 'rules', rulesTestPath)).toContain('SUCCESS');
  });

  it.each(alerts.map((a) => [a.alert!]))('%s has a unit test where it fires and one where it stays silent', (name) => {
    const cases = ruleTests.filter((t) => t.alertname === name);
    expect(cases.some((t) => (t.exp_alerts ?? []).length > 0)).toBe(true);
    expect(cases.some((t) => (t.exp_alerts ?? []).length === 0)).toBe(true);
  });

  it('test only alerts that exist', () => {
    const names = new Set(alerts.map((a) => a.alert));
    expect(ruleTests.map((t) => t.alertname).filter((n) => !names.has(n))).toEqual([]);
  });

  it.each(alerts.map((a) => [a.alert!, a]))(
    '%s has a severity, a summary, a description and a runbook section in docs/operations.md',
    (_name, alert) => {
      const sections = new Set(
        [...readFileSync(runbooksPath, 'utf8').matchAll(/^#{1,6} (.+)$/gm)].map((m) => anchor(m[1])),
      );
      expect(['page', 'ticket']).toContain(alert.labels?.severity);
      expect(alert.annotations?.summary).toEqual(expect.any(String));
      expect(alert.annotations?.description).toEqual(expect.any(String));
      const [path, section] = (alert.annotations?.runbook_url ?? '').split('#');
      expect(path).toBe('docs/operations.md');
      expect(sections).toContain(section);
    },
  );

  it('are listed in docs/observability.md, each with a link to its runbook section', () => {
    const doc = readFileSync(join(root, 'docs', 'observability.md'), 'utf8');
    for (const alert of alerts) {
      // runbook_url is relative to the repository; the link is relative to docs/.
      const link = (alert.annotations?.runbook_url ?? '').replace(/^docs\//, '');
      expect(doc).toContain(`[${alert.alert}](${link})`);
    }
  });

  it('name only metrics of the contract (ops/metrics.json) or their own recording rules', () => {
    const allowed = exportedNames();
    const unknown = rules.flatMap((r) => seriesNames(r.expr).filter((n) => !allowed.has(n)));
    expect(unknown).toEqual([]);
  });
});

describe('Grafana dashboard (ops/grafana/payments.json)', () => {
  it('takes its Prometheus data source from a template variable', () => {
    expect(dashboard.templating.list).toContainEqual(
      expect.objectContaining({ name: 'datasource', type: 'datasource', query: 'prometheus' }),
    );
    for (const panel of queryPanels) {
      expect([panel.title, panel.datasource?.uid]).toEqual([panel.title, '${datasource}']);
      for (const target of panel.targets ?? []) expect(target.datasource?.uid).toBe('${datasource}');
    }
  });

  it('has queries that parse (each loaded as a recording rule for promtool check rules)', async () => {
    const dir = mkdtempSync(join(tmpdir(), 'dashboard-rules-'));
    try {
      const records = queryPanels.flatMap((p) =>
        (p.targets ?? []).map((t, i) => ({ record: `dashboard:panel_${p.id}_${i}`, expr: resolveVariables(t.expr) })),
      );
      expect(records.length).toBeGreaterThan(queryPanels.length);
      const file = join(dir, 'dashboard.rules.json');
      // JSON is YAML, so promtool reads this file as it is.
      writeFileSync(file, JSON.stringify({ groups: [{ name: 'dashboard', rules: records }] }));
      expect(await promtoolRun('check', 'rules', file)).toContain(`SUCCESS: ${records.length} rules found`);
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });

  it('names in every panel only metrics of the contract (ops/metrics.json) or the recording rules', () => {
    const allowed = exportedNames();
    const variableQueries = dashboard.templating.list.flatMap((v) =>
      v.type === 'query' ? [typeof v.query === 'string' ? v.query : v.query.query] : [],
    );
    const exprs = [
      ...queryPanels.flatMap((p) => (p.targets ?? []).map((t) => ({ where: p.title, expr: resolveVariables(t.expr) }))),
      ...variableQueries.map((q) => ({ where: 'variable', expr: q.replace(/^label_values\((\w+),.*$/, '$1') })),
    ];
    for (const { where, expr } of exprs) {
      const names = seriesNames(expr);
      expect([where, expr, names.length > 0]).toEqual([where, expr, true]);
      expect([where, names.filter((n) => !allowed.has(n))]).toEqual([where, []]);
    }
  });
});

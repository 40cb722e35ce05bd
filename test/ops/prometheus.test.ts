import { execFile, spawn } from 'node:child_process';
import { existsSync } from 'node:fs';
import { readFile } from 'node:fs/promises';
import { promisify } from 'node:util';
import t, { type Test } from 'tap';
import { parse } from 'yaml';
import { buildTestApp, listen } from '../helpers/app.js';
import { EXCLUDED_DEFAULT_METRICS } from '../../src/observability/metrics.js';
import { SERVER_URL } from '../helpers/database.js';
import { httpRequest } from '../helpers/http.js';
import { pushEnv, webhookSecret } from '../events/fixtures.js';
import { ROOT } from '../helpers/root.js';

// The operations assets against the tools that read them: promtool (Debian's `prometheus`
// package; CI installs it) checks the rules, runs their unit tests and lints a real scrape; every
// expression of the rules and of the Grafana dashboard names only metrics the gateway exports.

const run = promisify(execFile);
const PROMETHEUS_DIR = `${ROOT}deploy/prometheus`;
const PROMTOOL = process.env.PROMTOOL_BIN || '/usr/bin/promtool';
if (!existsSync(PROMTOOL)) {
  throw new Error(`promtool is not installed at ${PROMTOOL}: apt-get install prometheus (Debian), or set PROMTOOL_BIN`);
}

/** Metrics only a gateway on PostgreSQL exports (PGlite has no connection pool). */
const POSTGRES_ONLY = ['underwriting_db_pool_connections', 'underwriting_db_pool_waiting', 'underwriting_db_pool_max'];

const KEYWORDS = new Set(['and', 'or', 'unless', 'by', 'without', 'on', 'ignoring', 'group_left', 'group_right', 'bool', 'offset', 'inf', 'nan']);

/** The metric names a PromQL expression reads (functions, keywords, labels and Grafana variables aside). */
export function metricNames(expr: string): string[] {
  const bare = expr
    .replace(/"(?:[^"\\]|\\.)*"/g, '""') // strings
    .replace(/\{[^}]*\}/g, '') // label matchers
    .replace(/\[[^\]]*\]/g, '') // ranges
    .replace(/\b(by|without|on|ignoring|group_left|group_right)\s*\([^)]*\)/g, '') // label lists
    .replace(/\$\w+/g, ''); // Grafana variables
  const names = new Set<string>();
  for (const m of bare.matchAll(/(?<![\w.:])[a-zA-Z_:][a-zA-Z0-9_:]*/g)) {
    const name = m[0];
    const next = bare.slice(m.index! + name.length).trimStart()[0];
    if (next === '(' || KEYWORDS.has(name.toLowerCase())) continue; // a function or an operator
    names.add(name);
  }
  return [...names];
}

/** Every name a scrape exports: each metric of its # TYPE lines, histograms with their _bucket, _sum and _count. */
function exportedNames(scrape: string): Set<string> {
  const names = new Set<string>();
  for (const [, name, type] of scrape.matchAll(/^# TYPE (\S+) (\S+)$/gm)) {
    names.add(name!);
    if (type === 'histogram' || type === 'summary') for (const suffix of ['_bucket', '_sum', '_count']) names.add(`${name}${suffix}`);
  }
  return names;
}

/** A gateway configured with everything that has metrics (token client, pushed events), scraped over HTTP. */
async function realScrape(t: Test): Promise<string> {
  const env = { ...pushEnv(['http://127.0.0.1:9/hook'], webhookSecret()), AUTH_URL: 'http://127.0.0.1:9', CLIENT_ID: 'metrics-client', CLIENT_SECRET: 'metrics-client-secret-0123' };
  const { app } = await buildTestApp(t, { env });
  const base = await listen(app);
  // Some traffic, so that labelled series have samples.
  await httpRequest(`${base}/healthz`);
  await httpRequest(`${base}/v1/underwritings`, { body: { customerUuid: 'x' } });
  await httpRequest(`${base}/v1/callbacks/underwriting`, { body: { customerUuid: 'x' } });
  const res = await httpRequest(`${base}/metrics`);
  t.equal(res.status, 200);
  return res.text;
}

t.test('promtool check rules: alerts.yml is valid', async (t) => {
  const { stdout } = await run(PROMTOOL, ['check', 'rules', 'alerts.yml'], { cwd: PROMETHEUS_DIR });
  t.match(stdout, /SUCCESS: \d+ rules found/);
});

t.test('promtool test rules: every alert fires where it must and not where it must not', async (t) => {
  const result = await run(PROMTOOL, ['test', 'rules', 'alerts.test.yml'], { cwd: PROMETHEUS_DIR }).catch((err: { stdout: string; stderr: string; code: number }) => err);
  t.match(result.stdout, /SUCCESS/, `${result.stdout}${result.stderr}`);
  t.notOk('code' in result && result.code, 'exit code 0');
});

t.test('promtool check metrics finds nothing in a real scrape', async (t) => {
  const scrape = await realScrape(t);
  const child = spawn(PROMTOOL, ['check', 'metrics'], { stdio: ['pipe', 'pipe', 'pipe'] });
  let output = '';
  child.stdout.on('data', (d: Buffer) => (output += d));
  child.stderr.on('data', (d: Buffer) => (output += d));
  const exited = new Promise<number | null>((resolve) => child.once('close', resolve));
  child.stdin.end(scrape);
  t.equal(await exited, 0, 'exit code 0');
  t.equal(output.trim(), '', 'no findings');
  t.match(scrape, /^underwriting_database_ready 1$/m, 'the scrape is the gateway’s');
  t.match(scrape, /^underwriting_campaign_lines_total\{outcome="accepted"\} 0$/m, 'the campaign metrics are in it');
  t.match(scrape, /^underwriting_campaigns\{status="running"\} \d+$/m);
});

t.test('every expression of the alert rules and of the dashboard names only metrics the gateway exports', async (t) => {
  const exported = exportedNames(await realScrape(t));
  if (!SERVER_URL) for (const name of POSTGRES_ONLY) exported.add(name);
  else for (const name of POSTGRES_ONLY) t.ok(exported.has(name), `${name} exported on PostgreSQL`);

  const rules = parse(await readFile(`${PROMETHEUS_DIR}/alerts.yml`, 'utf8')) as { groups: Array<{ rules: Array<{ alert: string; expr: string }> }> };
  const alerts = rules.groups.flatMap((g) => g.rules);
  t.ok(alerts.length >= 6, `${alerts.length} alert rules`);
  for (const rule of alerts) {
    const names = metricNames(rule.expr);
    t.ok(names.length > 0, `${rule.alert} reads a metric`);
    for (const name of names) t.ok(exported.has(name), `${rule.alert}: ${name} is exported`);
  }

  const dashboard = JSON.parse(await readFile(`${ROOT}deploy/grafana/dashboard.json`, 'utf8'));
  const exprs: Array<{ where: string; expr: string }> = [];
  for (const panel of dashboard.panels) for (const target of panel.targets ?? []) exprs.push({ where: `panel "${panel.title}"`, expr: target.expr });
  for (const variable of dashboard.templating.list) if (variable.type === 'query') exprs.push({ where: `variable ${variable.name}`, expr: /label_values\((\w+)/.exec(variable.definition)![1]! });
  t.ok(exprs.length >= 20, `${exprs.length} dashboard expressions`);
  for (const { where, expr } of exprs) {
    const names = metricNames(expr);
    t.ok(names.length > 0, `${where} reads a metric`);
    for (const name of names) t.ok(exported.has(name), `${where}: ${name} is exported`);
  }
});

t.test('the name check reads PromQL as meant: functions, labels, keywords and variables are not metrics', async (t) => {
  t.same(metricNames('sum by (le, route) (rate(http_request_duration_seconds_bucket{instance=~"$instance",route="/x"}[$__rate_interval]))'), ['http_request_duration_seconds_bucket']);
  t.same(metricNames('max(a_metric) > max(b_metric) + 120'), ['a_metric', 'b_metric']);
  t.same(metricNames('x_total unless on (instance) y_total > 0 or z == 0'), ['x_total', 'y_total', 'z']);
  t.same(metricNames('histogram_quantile(0.95, sum by (le) (rate(no_such_metric_bucket[5m])))'), ['no_such_metric_bucket'], 'an unknown name is found, and would fail the check above');
});

t.test('the dashboard is a Grafana dashboard: unique panel ids, a datasource variable, positions', async (t) => {
  const dashboard = JSON.parse(await readFile(`${ROOT}deploy/grafana/dashboard.json`, 'utf8'));
  t.match(dashboard, { title: 'underwriting-gateway', uid: 'underwriting-gateway', schemaVersion: Number });
  t.ok(dashboard.templating.list.some((v: { type: string; name: string }) => v.type === 'datasource' && v.name === 'datasource'));
  const ids = dashboard.panels.map((p: { id: number }) => p.id);
  t.equal(new Set(ids).size, ids.length, 'panel ids are unique');
  for (const panel of dashboard.panels) {
    t.match(panel.gridPos, { h: Number, w: Number, x: Number, y: Number }, `${panel.title} has a position`);
    if (panel.type !== 'row') t.same(panel.datasource, { type: 'prometheus', uid: '${datasource}' }, `${panel.title} reads the chosen Prometheus`);
  }
});

t.test("docs/observability.md lists exactly the gateway's own metrics", async (t) => {
  const exported = new Set([...(await realScrape(t)).matchAll(/^# TYPE (\S+) /gm)].map((m) => m[1]!));
  if (!SERVER_URL) for (const name of POSTGRES_ONLY) exported.add(name);
  const own = [...exported].filter((name) => !/^(process|nodejs)_/.test(name)).sort();
  const page = await readFile(`${ROOT}docs/observability.md`, 'utf8');
  const documented = [...page.matchAll(/^\| `([a-z_:]+)` \| (counter|gauge|histogram) \|/gm)].map((m) => m[1]!).sort();
  t.same(documented, own, 'one row per metric, none missing, none stale');
  for (const name of EXCLUDED_DEFAULT_METRICS) t.match(page, name, `why ${name} is left out`);
});

import { describe, expect, it } from 'vitest';
import { parse } from 'yaml';
import {
  allowedAggregations,
  documentedExpressions,
  exportedNames,
  repoFile,
  selectors,
} from '../helpers/promql.js';

/**
 * deploy/prometheus/chatlane.rules.yml and deploy/grafana/chatlane.json against chatlane's own
 * metrics registry: a renamed or removed metric fails here, not on an operator's dashboard.
 */

interface Rule {
  alert?: string;
  expr: string;
}
const rules = (
  parse(repoFile('deploy/prometheus/chatlane.rules.yml')) as { groups: Array<{ rules: Rule[] }> }
).groups.flatMap((g) => g.rules);

interface Panel {
  title: string;
  type: string;
  targets?: Array<{ expr: string }>;
  panels?: Panel[];
}
const dashboard = JSON.parse(repoFile('deploy/grafana/chatlane.json')) as { panels: Panel[] };
const panels = dashboard.panels.flatMap((p) => [p, ...(p.panels ?? [])]).filter((p) => p.type !== 'row');

/** Grafana's range variables, as a fixed range so Prometheus's grammar reads them. */
const withoutGrafanaVariables = (expr: string) => expr.replace(/\$__(rate_interval|interval|range)/g, '5m');

const normalised = (expr: string) => expr.replace(/\s+/g, ' ').trim();

const expressions = [
  ...rules.map((r) => ({ where: `rule ${r.alert}`, expr: r.expr })),
  ...panels.flatMap((p) => (p.targets ?? []).map((t) => ({ where: `panel "${p.title}"`, expr: t.expr }))),
];

describe('the Prometheus rules and the Grafana dashboard under deploy/', () => {
  it('are there: an alert rule each, every panel with a query', () => {
    expect(rules.length).toBeGreaterThanOrEqual(10);
    expect(rules.every((r) => r.alert && r.expr)).toBe(true);
    expect(panels.length).toBeGreaterThanOrEqual(15);
    for (const p of panels) expect(p.targets?.length, p.title).toBeGreaterThan(0);
  });

  it('parse as PromQL and name only metrics chatlane exports (its registry, read now)', async () => {
    const names = await exportedNames();
    for (const { where, expr } of expressions) {
      const { errors, found } = selectors(withoutGrafanaVariables(expr));
      expect(errors, `${where}: ${expr}`).toBe(0);
      expect(found.length, `${where}: ${expr}`).toBeGreaterThan(0);
      for (const s of found) expect(names.has(s.metric), `${where} names ${s.metric}`).toBe(true);
    }
  });

  it('sum per-process series and never sum queue-wide ones', () => {
    for (const { where, expr } of expressions) {
      for (const s of selectors(withoutGrafanaVariables(expr)).found) {
        expect(allowedAggregations(s.metric), `${where}: ${s.metric} by ${s.aggregatedBy}`).toContain(
          s.aggregatedBy,
        );
      }
    }
  });

  it('the dashboard has the panels operators asked for: backlog, queue wait, turn latency, model errors and fallbacks, tokens and cost, delivery failures and lag, live streams', () => {
    const named = (metric: string) =>
      panels.some((p) =>
        (p.targets ?? []).some((t) =>
          selectors(withoutGrafanaVariables(t.expr)).found.some((s) => s.metric === metric),
        ),
      );
    for (const metric of [
      'bullmq_job_count',
      'chatlane_queue_wait_seconds_bucket',
      'chatlane_turn_duration_seconds_bucket',
      'chatlane_model_errors_total',
      'chatlane_model_fallbacks_total',
      'chatlane_model_tokens_total',
      'chatlane_model_cost_usd_total',
      'chatlane_delivery_failures_total',
      'chatlane_delivery_lag_seconds_bucket',
      'chatlane_sse_clients',
    ])
      expect(named(metric), metric).toBe(true);
  });

  it('hold every alert the operations page lists as PromQL, as a rule', () => {
    const ruleExprs = new Set(rules.map((r) => normalised(r.expr)));
    const alerts = documentedExpressions('docs/operations.md');
    expect(alerts.length).toBeGreaterThan(0);
    for (const expr of alerts) expect(ruleExprs.has(normalised(expr)), expr).toBe(true);
  });
});

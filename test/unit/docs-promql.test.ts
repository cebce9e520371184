import { describe, expect, it } from 'vitest';
import { allowedAggregations, documentedExpressions, exportedNames, selectors } from '../helpers/promql.js';

/**
 * The documents' alert examples (every ```promql block in README.md and docs/), checked with Prometheus's own PromQL grammar: they parse, they
 * name metrics chatlane exports, and they aggregate the way a fleet needs — per-process series
 * summed, queue-wide series (one exporter, or by mistake several reporting the same value)
 * taken with max/min or tested with absent(), never summed.
 */

describe("the documents' PromQL examples", () => {
  const expressions = documentedExpressions();

  it('are there', () => {
    expect(expressions.length).toBeGreaterThanOrEqual(5);
  });

  it('parse as PromQL and name only metrics chatlane exports', async () => {
    const names = await exportedNames();
    for (const expr of expressions) {
      const { errors, found } = selectors(expr);
      expect(errors, expr).toBe(0);
      expect(found.length, expr).toBeGreaterThan(0);
      for (const s of found) expect(names.has(s.metric), `${s.metric} in ${expr}`).toBe(true);
    }
  });

  it('sum per-process series and never sum queue-wide ones', () => {
    for (const expr of expressions) {
      for (const s of selectors(expr).found) {
        const allowed = allowedAggregations(s.metric);
        expect(allowed, `${s.metric} aggregated by ${s.aggregatedBy} in ${expr}`).toContain(s.aggregatedBy);
      }
    }
  });

  it('the checker itself tells the two apart', () => {
    expect(selectors('sum(bullmq_job_count)').found[0]?.aggregatedBy).toBe('sum');
    expect(selectors('rate(chatlane_messages_total[5m])').found[0]?.aggregatedBy).toBeUndefined();
    expect(selectors('sum(rate(x[5m]) >').errors).toBeGreaterThan(0);
  });
});

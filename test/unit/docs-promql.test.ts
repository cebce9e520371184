import { parser } from '@prometheus-io/lezer-promql';
import { describe, expect, it } from 'vitest';
import { createMetrics } from '../../src/shared/metrics.js';
import { blocks } from '../helpers/docs.js';

/**
 * The documents' alert examples (every ```promql block in README.md and docs/), checked with Prometheus's own PromQL grammar: they parse, they
 * name metrics chatlane exports, and they aggregate the way a fleet needs — per-process series
 * summed, queue-wide series (one exporter, or by mistake several reporting the same value)
 * taken with max/min or tested with absent(), never summed.
 */

/** Each expression of the ```promql blocks; an indented line continues the previous one. */
function documentedExpressions(): string[] {
  const out: string[] = [];
  for (const block of blocks('promql')) {
    for (const line of block.code.split('\n')) {
      if (line.trim() === '' || line.trim().startsWith('#')) continue;
      if (/^\s/.test(line) && out.length > 0) out[out.length - 1] += ` ${line.trim()}`;
      else out.push(line.trim());
    }
  }
  return out;
}

type SyntaxNode = ReturnType<typeof parser.parse>['topNode'];

const QUEUE_WIDE = new Set(['bullmq_job_count', 'bullmq_job_completed_total', 'bullmq_job_failed_total']);

/** Every series name chatlane's registry exports (histograms as their three series). */
async function exportedNames(): Promise<Set<string>> {
  const metrics = await createMetrics({ defaultMetrics: false }).registry.getMetricsAsJSON();
  const names = new Set<string>([...QUEUE_WIDE, 'chatlane_queue_metrics_up']);
  for (const m of metrics) {
    if (String(m.type) === 'histogram')
      for (const s of ['_bucket', '_count', '_sum']) names.add(`${m.name}${s}`);
    else names.add(m.name);
  }
  return names;
}

interface Selector {
  metric: string;
  /** The nearest enclosing aggregation (`sum`, `max`, ...) or wrapping function `absent`. */
  aggregatedBy: string | undefined;
}

function selectors(expr: string): { errors: number; found: Selector[] } {
  const tree = parser.parse(expr);
  let errors = 0;
  const found: Selector[] = [];
  tree.iterate({
    enter: (ref) => {
      if (ref.type.isError) errors++;
      if (ref.name !== 'Identifier' || ref.node.parent?.name !== 'VectorSelector') return;
      let aggregatedBy: string | undefined;
      for (let n: SyntaxNode | null = ref.node.parent; n; n = n.parent) {
        if (n.name === 'AggregateExpr') {
          const op = n.getChild('AggregateOp');
          aggregatedBy = op ? expr.slice(op.from, op.to) : undefined;
          break;
        }
        const fn = n.name === 'FunctionCall' ? n.getChild('FunctionIdentifier') : null;
        if (fn && expr.slice(fn.from, fn.to) === 'absent') {
          aggregatedBy = 'absent';
          break;
        }
      }
      found.push({ metric: expr.slice(ref.from, ref.to), aggregatedBy });
    },
  });
  return { errors, found };
}

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
        const allowed = QUEUE_WIDE.has(s.metric)
          ? ['max', 'min', 'absent']
          : // One value per exporter: min says "any of them failing".
            s.metric === 'chatlane_queue_metrics_up'
            ? ['min', 'max']
            : ['sum'];
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

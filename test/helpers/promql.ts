import { readFileSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import { parser } from '@prometheus-io/lezer-promql';
import { createMetrics } from '../../src/shared/metrics.js';
import { blocks } from './docs.js';

/**
 * PromQL checked with Prometheus's own grammar (the README's alerts, deploy/'s rules and
 * dashboard): which metrics an expression names, and how each is aggregated.
 */

type SyntaxNode = ReturnType<typeof parser.parse>['topNode'];

export const QUEUE_WIDE = new Set([
  'bullmq_job_count',
  'bullmq_job_completed_total',
  'bullmq_job_failed_total',
]);

/** Every series name chatlane's registry exports (histograms as their three series). */
export async function exportedNames(): Promise<Set<string>> {
  const metrics = await createMetrics({ defaultMetrics: false }).registry.getMetricsAsJSON();
  const names = new Set<string>([...QUEUE_WIDE, 'chatlane_queue_metrics_up']);
  for (const m of metrics) {
    if (String(m.type) === 'histogram')
      for (const s of ['_bucket', '_count', '_sum']) names.add(`${m.name}${s}`);
    else names.add(m.name);
  }
  return names;
}

export interface Selector {
  metric: string;
  /** The nearest enclosing aggregation (`sum`, `max`, ...) or wrapping function `absent`. */
  aggregatedBy: string | undefined;
}

export function selectors(expr: string): { errors: number; found: Selector[] } {
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

/** How a metric may be aggregated across processes: per-process series summed, queue-wide ones taken once. */
export function allowedAggregations(metric: string): string[] {
  if (QUEUE_WIDE.has(metric)) return ['max', 'min', 'absent'];
  // One value per exporter: min says "any of them failing".
  if (metric === 'chatlane_queue_metrics_up') return ['min', 'max'];
  return ['sum'];
}

const root = fileURLToPath(new URL('../../', import.meta.url));

/** A file of the repository, as text. */
export const repoFile = (path: string) => readFileSync(`${root}${path}`, 'utf8');

/** Each expression of the documents' ```promql blocks (of one document when `doc` is given); an indented line continues the previous one. */
export function documentedExpressions(doc?: string): string[] {
  const out: string[] = [];
  for (const block of blocks('promql').filter((b) => doc === undefined || b.doc === doc)) {
    for (const line of block.code.split('\n')) {
      if (line.trim() === '' || line.trim().startsWith('#')) continue;
      if (/^\s/.test(line) && out.length > 0) out[out.length - 1] += ` ${line.trim()}`;
      else out.push(line.trim());
    }
  }
  return out;
}

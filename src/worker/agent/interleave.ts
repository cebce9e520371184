import type { UIMessage } from 'ai';

type Part = UIMessage['parts'][number];

export interface MergePoint<T> {
  /** The step before which these messages were given to the model. */
  stepNumber: number;
  items: T[];
}

export type Segment<T> = { kind: 'assistant'; parts: Part[] } | { kind: 'user'; items: T[] };

/**
 * Lay out one turn for history: the assistant message is split at the step boundaries
 * where user messages were merged in, so each merged message sits exactly where the model
 * saw it (DESIGN §2.3). Steps are delimited by `step-start` parts.
 */
export function interleave<T>(parts: Part[], merges: MergePoint<T>[]): Segment<T>[] {
  const steps: Part[][] = [];
  for (const part of parts) {
    if (part.type === 'step-start' || steps.length === 0) steps.push([]);
    steps[steps.length - 1]!.push(part);
  }
  const out: Segment<T>[] = [];
  const pushAssistant = (from: number, to: number) => {
    const seg = steps.slice(from, to).flat();
    if (seg.some(isMeaningful)) out.push({ kind: 'assistant', parts: seg });
  };
  let from = 0;
  for (const merge of [...merges].sort((a, b) => a.stepNumber - b.stepNumber)) {
    const at = Math.min(Math.max(merge.stepNumber, from), steps.length);
    pushAssistant(from, at);
    out.push({ kind: 'user', items: merge.items });
    from = at;
  }
  pushAssistant(from, steps.length);
  return out;
}

function isMeaningful(part: Part): boolean {
  if (part.type === 'step-start') return false;
  if (part.type === 'text' || part.type === 'reasoning') return part.text.trim().length > 0;
  return true;
}

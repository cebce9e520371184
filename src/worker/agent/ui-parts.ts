import type { StepResult, ToolSet, UIMessage } from 'ai';

type Part = UIMessage['parts'][number];

const errorText = (error: unknown) =>
  error instanceof Error ? error.message : typeof error === 'string' ? error : JSON.stringify(error);
type Mutable = Record<string, unknown> & { type: string; toolCallId?: string };

/**
 * The assistant UIMessage parts of a finished tool loop, built from its steps the way the
 * AI SDK's UI message stream would build them (`step-start`, text, reasoning, one tool part
 * per call carrying input and output or error) — without streaming every turn through web
 * streams, which dominated a turn's CPU.
 */
export function stepsToUIParts(steps: ReadonlyArray<StepResult<ToolSet>>): Part[] {
  const parts: Mutable[] = [];
  for (const step of steps) {
    parts.push({ type: 'step-start' });
    const calls = new Map<string, Mutable>();
    for (const c of step.content) {
      switch (c.type) {
        case 'text':
          if (c.text) parts.push({ type: 'text', text: c.text, state: 'done' });
          break;
        case 'reasoning':
          if (c.text) parts.push({ type: 'reasoning', text: c.text, state: 'done' });
          break;
        case 'tool-call': {
          const part: Mutable = c.dynamic
            ? {
                type: 'dynamic-tool',
                toolName: c.toolName,
                toolCallId: c.toolCallId,
                state: 'input-available',
                input: c.input,
              }
            : {
                type: `tool-${c.toolName}`,
                toolCallId: c.toolCallId,
                state: 'input-available',
                input: c.input,
              };
          if (c.providerExecuted) part.providerExecuted = true;
          calls.set(c.toolCallId, part);
          parts.push(part);
          break;
        }
        case 'tool-result': {
          const part = calls.get(c.toolCallId);
          if (part) Object.assign(part, { state: 'output-available', output: c.output });
          break;
        }
        case 'tool-error': {
          const part = calls.get(c.toolCallId);
          if (part) Object.assign(part, { state: 'output-error', errorText: errorText(c.error) });
          break;
        }
        case 'tool-approval-request': {
          // The call waits for a person (docs/approvals.md) unless a rule answered at once: then
          // the response (and, approved, the result) follows in the same step.
          const part = calls.get(c.toolCall.toolCallId);
          if (part)
            Object.assign(part, {
              state: 'approval-requested',
              approval: {
                id: c.approvalId,
                ...(c.reason !== undefined && { requestReason: c.reason }),
                ...(c.isAutomatic && { isAutomatic: true }),
                ...(c.signature !== undefined && { signature: c.signature }),
              },
            });
          break;
        }
        case 'tool-approval-response': {
          const part = calls.get(c.toolCall.toolCallId);
          const approval = part?.approval as Record<string, unknown> | undefined;
          if (part && approval?.id === c.approvalId) {
            const reason = c.reason !== undefined ? { reason: c.reason } : {};
            Object.assign(part, {
              // Denied by a rule: the call is settled (the SDK records execution-denied).
              state: c.approved ? 'approval-responded' : 'output-denied',
              approval: { ...approval, approved: c.approved, ...reason },
            });
          }
          break;
        }
        default:
          // Sources and files are not produced by our tools.
          break;
      }
    }
  }
  return parts as unknown as Part[];
}

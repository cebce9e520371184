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
        default:
          // Sources, files and approval requests are not produced by our tools.
          break;
      }
    }
  }
  return parts as unknown as Part[];
}

import type { StepResult, ToolSet } from 'ai';
import { describe, expect, it } from 'vitest';
import { stepsToUIParts } from '../../src/worker/agent/ui-parts.js';

/** A finished step with only `content` read. */
const step = (content: object[]) => ({ content }) as unknown as StepResult<ToolSet>;
const call = (id: string) => ({
  type: 'tool-call',
  toolCallId: id,
  toolName: 'exec_shell',
  input: { command: id },
});

describe('stepsToUIParts and tool approval', () => {
  it('a call that waits for a person is a part in approval-requested, with its approval id, reason and signature', () => {
    const c = call('c1');
    expect(
      stepsToUIParts([
        step([
          c,
          { type: 'tool-approval-request', approvalId: 'a1', toolCall: c, reason: 'risky', signature: 's' },
        ]),
      ]),
    ).toEqual([
      { type: 'step-start' },
      {
        type: 'tool-exec_shell',
        toolCallId: 'c1',
        state: 'approval-requested',
        input: { command: 'c1' },
        approval: { id: 'a1', requestReason: 'risky', signature: 's' },
      },
    ]);
  });

  it('a call a rule answered at once is settled in the same step: denied, or run with its output', () => {
    const denied = call('c2');
    const approved = call('c3');
    const parts = stepsToUIParts([
      step([
        denied,
        { type: 'tool-approval-request', approvalId: 'a2', toolCall: denied, isAutomatic: true },
        {
          type: 'tool-approval-response',
          approvalId: 'a2',
          toolCall: denied,
          approved: false,
          reason: 'by rule',
        },
        approved,
        { type: 'tool-approval-request', approvalId: 'a3', toolCall: approved, isAutomatic: true },
        { type: 'tool-approval-response', approvalId: 'a3', toolCall: approved, approved: true },
        { type: 'tool-result', toolCallId: 'c3', toolName: 'exec_shell', input: {}, output: 'ok' },
      ]),
    ]);
    expect(parts.slice(1)).toEqual([
      expect.objectContaining({
        state: 'output-denied',
        approval: { id: 'a2', isAutomatic: true, approved: false, reason: 'by rule' },
      }),
      expect.objectContaining({
        state: 'output-available',
        output: 'ok',
        approval: { id: 'a3', isAutomatic: true, approved: true },
      }),
    ]);
  });
});

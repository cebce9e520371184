import type { UIMessage } from 'ai';
import { describe, expect, it } from 'vitest';
import { wholeReplyFields } from '../../src/worker/turn/whole-reply.js';

const chunks = (fields: ReturnType<typeof wholeReplyFields>) =>
  fields.flatMap(([f, v]) =>
    f === 'c' ? [JSON.parse(v) as { type: string } & Record<string, unknown>] : [],
  );

describe('an unstreamed turn’s whole reply', () => {
  it('names its messages, then shows each step as a streamed reply would: sends as text, tools as tool parts, empty steps left out', () => {
    const response = {
      id: 'run-a',
      role: 'assistant',
      parts: [
        { type: 'step-start' },
        { type: 'reasoning', text: 'thinking', state: 'done' },
        {
          type: 'tool-lookup_order',
          toolCallId: 'c1',
          state: 'output-available',
          input: { id: 7 },
          output: { status: 'late' },
        },
        { type: 'step-start' },
        { type: 'text', text: 'a remark', state: 'done' },
        {
          type: 'tool-chat_send',
          toolCallId: 'c2',
          state: 'output-available',
          input: { text: 'your order is late' },
          output: { status: 'sent' },
        },
        { type: 'tool-refund', toolCallId: 'c3', state: 'output-error', input: {}, errorText: 'no' },
        { type: 'step-start' },
      ],
    } as unknown as UIMessage;
    const fields = wholeReplyFields(response, ['m1', 'm2'], 'run-a0');
    expect(fields[0]).toEqual(['m', '["m1","m2"]']);
    expect(chunks(fields)).toEqual([
      { type: 'start', messageId: 'run-a0' },
      { type: 'start-step' },
      { type: 'tool-input-available', toolCallId: 'c1', toolName: 'lookup_order', input: { id: 7 } },
      { type: 'tool-output-available', toolCallId: 'c1', output: { status: 'late' } },
      { type: 'finish-step' },
      { type: 'start-step' },
      { type: 'text-start', id: 't4' },
      { type: 'text-delta', id: 't4', delta: 'a remark' },
      { type: 'text-end', id: 't4' },
      { type: 'text-start', id: 'c2', providerMetadata: { chatlane: { tool: 'chat_send' } } },
      { type: 'text-delta', id: 'c2', delta: 'your order is late' },
      { type: 'text-end', id: 'c2' },
      { type: 'tool-input-available', toolCallId: 'c3', toolName: 'refund', input: {} },
      { type: 'tool-output-error', toolCallId: 'c3', errorText: 'no' },
      { type: 'finish-step' },
      { type: 'finish' },
    ]);
  });

  it('shows a call waiting for a person as its approval request', () => {
    const response = {
      id: 'r',
      role: 'assistant',
      parts: [
        { type: 'step-start' },
        {
          type: 'dynamic-tool',
          toolName: 'mcp__pay',
          toolCallId: 'c9',
          state: 'approval-requested',
          input: { amount: 5 },
          approval: { id: 'ap1', requestReason: 'a payment', signature: 'sig' },
        },
      ],
    } as unknown as UIMessage;
    expect(chunks(wholeReplyFields(response, ['m1'], 'r0')).slice(2, 4)).toEqual([
      { type: 'tool-input-available', toolCallId: 'c9', toolName: 'mcp__pay', input: { amount: 5 } },
      {
        type: 'tool-approval-request',
        approvalId: 'ap1',
        toolCallId: 'c9',
        reason: 'a payment',
        signature: 'sig',
      },
    ]);
  });
});

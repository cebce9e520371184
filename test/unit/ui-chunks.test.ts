import { readUIMessageStream, type TextStreamPart, type ToolSet, type UIMessageChunk } from 'ai';
import { describe, expect, it } from 'vitest';
import { isSendTextStart, SEND_PART_METADATA } from '../../src/shared/store/reply-send-part.js';
import { type UiChunk, UiChunker } from '../../src/worker/agent/stream/ui-chunks.js';

type Part = TextStreamPart<ToolSet>;

function chunksOf(parts: object[]): UiChunk[] {
  const out: UiChunk[] = [];
  const chunker = new UiChunker((c) => out.push(c));
  for (const p of parts) chunker.push(p as Part);
  return out;
}

const deltas = (chunks: UiChunk[]) =>
  chunks.filter((c) => c.type === 'text-delta').map((c) => c.delta as string);

describe('UiChunker', () => {
  it('streams chat_send’s text as a text part while the tool input is generated, escapes and all', () => {
    const input = JSON.stringify({ text: 'hello "world"\nbye' });
    const pieces = [
      input.slice(0, 5),
      input.slice(5, 12),
      input.slice(12, 16),
      input.slice(16, 19),
      input.slice(19),
    ];
    const chunks = chunksOf([
      { type: 'start-step' },
      { type: 'tool-input-start', id: 'call1', toolName: 'chat_send' },
      ...pieces.map((delta) => ({ type: 'tool-input-delta', id: 'call1', delta })),
      { type: 'tool-input-end', id: 'call1' },
      {
        type: 'tool-call',
        toolCallId: 'call1',
        toolName: 'chat_send',
        input: { text: 'hello "world"\nbye' },
      },
      {
        type: 'tool-result',
        toolCallId: 'call1',
        toolName: 'chat_send',
        input: {},
        output: { status: 'sent' },
      },
      { type: 'finish-step' },
    ]);
    expect(chunks[0]).toEqual({ type: 'start-step' });
    expect(chunks[1]).toEqual({ type: 'text-start', id: 'call1', providerMetadata: SEND_PART_METADATA });
    expect(deltas(chunks).length).toBeGreaterThanOrEqual(3);
    expect(deltas(chunks).join('')).toBe('hello "world"\nbye');
    expect(chunks.at(-2)).toEqual({ type: 'text-end', id: 'call1' });
    expect(chunks.at(-1)).toEqual({ type: 'finish-step' });
    // The send's own tool parts never reach the page: it shows what was said.
    expect(chunks.some((c) => c.type.startsWith('tool-'))).toBe(false);
  });

  it('a chat_send whose input did not stream is shown whole when the call completes', () => {
    const chunks = chunksOf([
      { type: 'tool-call', toolCallId: 'c2', toolName: 'chat_send', input: { text: 'all at once' } },
    ]);
    expect(chunks).toEqual([
      { type: 'text-start', id: 'c2', providerMetadata: SEND_PART_METADATA },
      { type: 'text-delta', id: 'c2', delta: 'all at once' },
      { type: 'text-end', id: 'c2' },
    ]);
  });

  it('plain text passes through; other tools are tool parts without their input deltas', () => {
    const chunks = chunksOf([
      { type: 'text-start', id: 't' },
      { type: 'text-delta', id: 't', text: 'thinking aloud' },
      { type: 'text-end', id: 't' },
      { type: 'tool-input-start', id: 'c3', toolName: 'chat_history_search' },
      { type: 'tool-input-delta', id: 'c3', delta: '{"query":"x"}' },
      { type: 'tool-call', toolCallId: 'c3', toolName: 'chat_history_search', input: { query: 'x' } },
      {
        type: 'tool-result',
        toolCallId: 'c3',
        toolName: 'chat_history_search',
        input: {},
        output: { hits: [] },
      },
      {
        type: 'tool-error',
        toolCallId: 'c4',
        toolName: 'chat_memory_update',
        input: {},
        error: new Error('too long'),
      },
      { type: 'reasoning-delta', id: 'r', text: 'hidden' },
    ]);
    expect(chunks).toEqual([
      { type: 'text-start', id: 't' },
      { type: 'text-delta', id: 't', delta: 'thinking aloud' },
      { type: 'text-end', id: 't' },
      { type: 'tool-input-start', toolCallId: 'c3', toolName: 'chat_history_search' },
      {
        type: 'tool-input-available',
        toolCallId: 'c3',
        toolName: 'chat_history_search',
        input: { query: 'x' },
      },
      { type: 'tool-output-available', toolCallId: 'c3', output: { hits: [] } },
      { type: 'tool-output-error', toolCallId: 'c4', errorText: 'too long' },
    ]);
  });

  it('a send cut short by a stop has its text part closed', () => {
    const out: UiChunk[] = [];
    const chunker = new UiChunker((c) => out.push(c));
    chunker.push({ type: 'tool-input-start', id: 'c5', toolName: 'chat_send' } as Part);
    chunker.push({ type: 'tool-input-delta', id: 'c5', delta: '{"text":"half' } as Part);
    chunker.closeOpen();
    expect(out).toEqual([
      { type: 'text-start', id: 'c5', providerMetadata: SEND_PART_METADATA },
      { type: 'text-delta', id: 'c5', delta: 'half' },
      { type: 'text-end', id: 'c5' },
    ]);
  });

  it('a step that shows nothing is left out of the live view; a step that does is framed by its step chunks', () => {
    const chunks = chunksOf([
      { type: 'start-step' },
      { type: 'tool-input-start', id: 'c6', toolName: 'chat_send' },
      { type: 'tool-input-delta', id: 'c6', delta: '{"text":"hi"}' },
      { type: 'tool-call', toolCallId: 'c6', toolName: 'chat_send', input: { text: 'hi' } },
      { type: 'tool-result', toolCallId: 'c6', toolName: 'chat_send', input: {}, output: {} },
      { type: 'finish-step' },
      // The model's last step after its send: nothing to show.
      { type: 'start-step' },
      { type: 'reasoning-delta', id: 'r', text: 'hidden' },
      { type: 'finish-step' },
    ]);
    expect(chunks.map((c) => c.type)).toEqual([
      'start-step',
      'text-start',
      'text-delta',
      'text-end',
      'finish-step',
    ]);
  });

  it('marks chat_send text parts apart from plain text, in chunks the AI SDK still reads as one message', async () => {
    const chunks = chunksOf([
      { type: 'start-step' },
      { type: 'text-start', id: 't' },
      { type: 'text-delta', id: 't', text: 'aloud' },
      { type: 'text-end', id: 't' },
      { type: 'tool-call', toolCallId: 'c6', toolName: 'chat_send', input: { text: 'sent' } },
      { type: 'finish-step' },
    ]);
    expect(chunks.filter(isSendTextStart).map((c) => c.id)).toEqual(['c6']);
    const stream = new ReadableStream<UIMessageChunk>({
      start(controller) {
        for (const c of [{ type: 'start', messageId: 'm' }, ...chunks, { type: 'finish' }])
          controller.enqueue(c as UIMessageChunk);
        controller.close();
      },
    });
    let last: unknown;
    for await (const message of readUIMessageStream({
      stream,
      onError: (e) => {
        throw e;
      },
    }))
      last = message;
    expect((last as { parts: unknown[] }).parts).toEqual([
      { type: 'step-start' },
      { type: 'text', text: 'aloud', state: 'done' },
      { type: 'text', text: 'sent', state: 'done', providerMetadata: SEND_PART_METADATA },
    ]);
  });

  it('closes what an interrupted step had open and ends the step, before the restarted step begins', async () => {
    const out: UiChunk[] = [];
    const chunker = new UiChunker((c) => out.push(c));
    for (const p of [
      { type: 'start-step' },
      { type: 'text-start', id: 'cut-text' },
      { type: 'text-delta', id: 'cut-text', text: 'Hi! How' },
      { type: 'tool-input-start', id: 'cut-send', toolName: 'chat_send' },
      { type: 'tool-input-delta', id: 'cut-send', delta: '{"text":"Hel' },
    ])
      chunker.push(p as Part);
    chunker.cut();
    for (const p of [
      { type: 'start-step' },
      { type: 'tool-call', toolCallId: 'new', toolName: 'chat_send', input: { text: 'all of it' } },
      { type: 'finish-step' },
    ])
      chunker.push(p as Part);
    expect(out.map((c) => `${c.type}${c.id ? ` ${c.id}` : ''}`)).toEqual([
      'start-step',
      'text-start cut-text',
      'text-delta cut-text',
      'text-start cut-send',
      'text-delta cut-send',
      'text-end cut-send',
      'text-end cut-text',
      'finish-step',
      'start-step',
      'text-start new',
      'text-delta new',
      'text-end new',
      'finish-step',
    ]);
    // A page reads it as one message: the cut parts done, the restarted step's after them.
    const stream = new ReadableStream<UIMessageChunk>({
      start(controller) {
        for (const c of [{ type: 'start', messageId: 'm' }, ...out, { type: 'finish' }])
          controller.enqueue(c as UIMessageChunk);
        controller.close();
      },
    });
    let last: { parts: Array<{ type: string; text?: string; state?: string }> } | undefined;
    for await (const message of readUIMessageStream({
      stream,
      onError: (e) => {
        throw e;
      },
    }))
      last = message as typeof last;
    expect(last!.parts.filter((p) => p.type === 'text').map((p) => [p.text, p.state])).toEqual([
      ['Hi! How', 'done'],
      ['Hel', 'done'],
      ['all of it', 'done'],
    ]);
  });

  it('cuts nothing when the aborted step had shown nothing', () => {
    const out: UiChunk[] = [];
    const chunker = new UiChunker((c) => out.push(c));
    chunker.push({ type: 'start-step' } as Part);
    chunker.cut();
    chunker.push({ type: 'start-step' } as Part);
    chunker.push({ type: 'text-start', id: 'a' } as Part);
    expect(out.map((c) => c.type)).toEqual(['start-step', 'text-start']);
  });

  it('streams a call that waits for a person as the AI SDK renders it: the part in approval-requested, with its approval', async () => {
    const toolCall = {
      type: 'tool-call',
      toolCallId: 'c7',
      toolName: 'exec_shell',
      input: { command: 'ls' },
    };
    const chunks = chunksOf([
      { type: 'start-step' },
      toolCall,
      { type: 'tool-approval-request', approvalId: 'a1', toolCall, signature: 'sig' },
      { type: 'finish-step' },
    ]);
    expect(chunks).toContainEqual({
      type: 'tool-approval-request',
      approvalId: 'a1',
      toolCallId: 'c7',
      signature: 'sig',
    });
    expect((await messageOf(chunks)).parts).toEqual([
      { type: 'step-start' },
      {
        type: 'tool-exec_shell',
        toolCallId: 'c7',
        state: 'approval-requested',
        input: { command: 'ls' },
        approval: { id: 'a1', signature: 'sig' },
      },
    ]);
  });

  it('streams the outcome of a resumed call into the message that asked: its output, or its denial', async () => {
    const asked = {
      id: 'm',
      role: 'assistant' as const,
      parts: [
        { type: 'step-start' as const },
        {
          type: 'tool-exec_shell' as const,
          toolCallId: 'c8',
          state: 'approval-responded' as const,
          input: { command: 'ls' },
          approval: { id: 'a2', approved: true },
        },
        {
          type: 'tool-exec_shell' as const,
          toolCallId: 'c9',
          state: 'approval-responded' as const,
          input: { command: 'rm x' },
          approval: { id: 'a3', approved: false },
        },
      ],
    };
    const chunks = chunksOf([
      { type: 'tool-result', toolCallId: 'c8', toolName: 'exec_shell', input: {}, output: { exitCode: 0 } },
      { type: 'tool-output-denied', toolCallId: 'c9', toolName: 'exec_shell' },
    ]);
    expect(chunks).toEqual([
      { type: 'tool-output-available', toolCallId: 'c8', output: { exitCode: 0 } },
      { type: 'tool-output-denied', toolCallId: 'c9' },
    ]);
    const parts = (await messageOf(chunks, asked)).parts as Array<{ state?: string; output?: unknown }>;
    expect(parts.map((p) => p.state)).toEqual([undefined, 'output-available', 'output-denied']);
    expect(parts[1]!.output).toEqual({ exitCode: 0 });
  });
});

/** The message the AI SDK's own reader makes of `chunks` (going on with `from`, as useChat does). */
async function messageOf(chunks: UiChunk[], from?: import('ai').UIMessage): Promise<{ parts: unknown[] }> {
  const stream = new ReadableStream<UIMessageChunk>({
    start(controller) {
      for (const c of [{ type: 'start', messageId: from?.id ?? 'm' }, ...chunks, { type: 'finish' }])
        controller.enqueue(c as UIMessageChunk);
      controller.close();
    },
  });
  let last: unknown;
  for await (const message of readUIMessageStream({
    stream,
    ...(from && { message: from }),
    onError: (e) => {
      throw e;
    },
  }))
    last = message;
  return last as { parts: unknown[] };
}

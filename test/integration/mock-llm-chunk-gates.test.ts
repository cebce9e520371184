import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { type RunningMockLlm, startMockLlm } from '../../src/mock-llm/server.js';

const TEXT = 'a reply long enough for several pieces';

let mock: RunningMockLlm;

beforeAll(async () => {
  mock = await startMockLlm({ port: 0 });
});

afterAll(async () => {
  await mock.close();
});

afterEach(() => {
  mock.state.reset();
});

/** The tool-call argument piece an SSE event carries ('' for none). */
function argumentsOf(event: string): string {
  const data = event.replace(/^data: /, '');
  if (data === '[DONE]') return '';
  const chunk = JSON.parse(data) as {
    choices: Array<{ delta?: { tool_calls?: Array<{ function?: { arguments?: string } }> } }>;
  };
  return chunk.choices[0]?.delta?.tool_calls?.[0]?.function?.arguments ?? '';
}

/** A streamed `chat_send` answer for `chatKey`, read as it arrives. */
async function openToolStream(chatKey: string) {
  const res = await fetch(`${mock.url}/chat/completions`, {
    method: 'POST',
    headers: { 'content-type': 'application/json' },
    body: JSON.stringify({
      model: 'm',
      stream: true,
      tools: [{ type: 'function', function: { name: 'chat_send', parameters: { type: 'object' } } }],
      messages: [
        { role: 'system', content: `ChatKey: ${chatKey}` },
        { role: 'user', content: TEXT },
      ],
    }),
  });
  const reader = res.body!.getReader();
  const decoder = new TextDecoder();
  let text = '';
  let done = false;
  let pending: ReturnType<typeof reader.read> | undefined;
  /** One read; with `quietMs`, false when nothing arrived that long (the read stays pending). */
  const readOnce = async (quietMs?: number): Promise<boolean> => {
    pending ??= reader.read();
    let timer: NodeJS.Timeout | undefined;
    const quiet = new Promise<undefined>((resolve) => {
      if (quietMs !== undefined) timer = setTimeout(() => resolve(undefined), quietMs);
    });
    const got = await Promise.race([pending, quiet]).finally(() => clearTimeout(timer));
    if (!got) return false;
    pending = undefined;
    if (got.done) done = true;
    else text += decoder.decode(got.value, { stream: true });
    return true;
  };
  // Whole events only: what follows the last blank line is one still arriving.
  const events = () => text.split('\n\n').slice(0, -1);
  const pieces = () =>
    events()
      .map(argumentsOf)
      .filter((a) => a !== '');
  return {
    events,
    /** The argument pieces (content events) so far. */
    pieces,
    async untilPieces(n: number): Promise<void> {
      while (pieces().length < n) {
        if (done) throw new Error(`the stream ended with ${pieces().length} pieces, not ${n}`);
        await readOnce();
      }
    },
    /** Nothing more arrives for `ms`: a wait that can let a broken gate pass, never fail a held one. */
    async quietFor(ms: number): Promise<boolean> {
      return !(await readOnce(ms));
    },
    async toEnd(): Promise<void> {
      while (!done) await readOnce();
    },
  };
}

describe('mock-llm chunk gates', () => {
  it('a held chat’s stream stops after each content event until next(); release() lets the rest out', async () => {
    const gates = mock.state.chunkGates;
    gates.hold('stepped');
    const stream = await openToolStream('stepped');
    await stream.untilPieces(1);
    expect(await stream.quietFor(150)).toBe(true);
    expect(stream.pieces()).toHaveLength(1);

    gates.next('stepped');
    await stream.untilPieces(2);
    expect(await stream.quietFor(150)).toBe(true);
    expect(stream.pieces()).toHaveLength(2);

    gates.release('stepped');
    await stream.toEnd();
    expect(stream.events().at(-1)).toBe('data: [DONE]');
    expect(stream.pieces().length).toBeGreaterThan(3);
    expect(JSON.parse(stream.pieces().join(''))).toEqual({ text: `echo: ${TEXT}` });
  });

  it('next() before the stream gets there lets that many more pieces out; other chats and reset() are not held', async () => {
    const gates = mock.state.chunkGates;
    gates.hold('ahead');
    gates.next('ahead');
    gates.next('ahead');
    const ahead = await openToolStream('ahead');
    await ahead.untilPieces(3);
    expect(await ahead.quietFor(150)).toBe(true);
    expect(ahead.pieces()).toHaveLength(3);

    // Another chat on the same mock streams as before: all at once.
    const free = await openToolStream('free');
    await free.toEnd();
    expect(free.events().at(-1)).toBe('data: [DONE]');

    mock.state.reset();
    expect(gates.holds('ahead')).toBe(false);
    await ahead.toEnd();
    expect(JSON.parse(ahead.pieces().join(''))).toEqual({ text: `echo: ${TEXT}` });
  });
});

import { describe, expect, it } from 'vitest';
import { countTextTokens } from '../../src/shared/tokens.js';
import { DefaultAssembler } from '../../src/worker/pipeline/assembler.js';
import { TokenBudgetCompressor } from '../../src/worker/pipeline/compressor.js';
import { windowStart, windowStep } from '../../src/worker/pipeline/provider.js';
import {
  CACHE_POINT,
  cacheKeyOptions,
  contextBlock,
  contextBlockTokens,
} from '../../src/worker/pipeline/request-cache.js';
import { assistantMessage, counted, userMessage } from '../helpers/messages.js';

const chatKey = 'telegram-chat-42';
const at = Date.UTC(2026, 10, 26, 7, 8, 9, 500);

describe("a user message's context block", () => {
  it('says when the message arrived (to the second, UTC) and who wrote it, from the message alone', () => {
    const m = userMessage(chatKey, 'u1', 'hi', { ts: at, username: 'alice', userId: '1001' });
    expect(contextBlock(m)).toBe('[sent 2026-11-26T07:08:09Z by alice (id 1001)]');
    expect(contextBlock(userMessage(chatKey, 'u2', 'hi', { ts: at }))).toBe('[sent 2026-11-26T07:08:09Z]');
    // The same message gives the same block whenever it is shown: in this turn and every later one.
    expect(contextBlock(structuredClone(m))).toBe(contextBlock(m));
  });

  it("bounds the block's tokens from above, closely, without tokenizing it per message", () => {
    const senders = [
      {},
      { username: 'alice' },
      { userId: '1001' },
      { username: 'Zoë Ünal-Smith', userId: 'U0123ABCD' },
    ];
    for (const [i, who] of senders.entries()) {
      for (const ts of [0, at, at + 37 * 86_400_123, Date.UTC(2099, 11, 31, 23, 59, 59)]) {
        const m = userMessage(chatKey, `u${i}`, 'hi', { ts, ...who });
        const exact = countTextTokens(contextBlock(m)!) + 1;
        expect(contextBlockTokens(m)).toBeGreaterThanOrEqual(exact);
        expect(contextBlockTokens(m)).toBeLessThanOrEqual(exact + 4);
      }
    }
  });

  it('is not added to assistant messages nor to a summary', () => {
    expect(contextBlock(assistantMessage(chatKey, 'a1', 'hello', { ts: at }))).toBeUndefined();
    expect(contextBlock(userMessage(chatKey, 's1', 'summary', { ts: at, kind: 'summary' }))).toBeUndefined();
    expect(contextBlockTokens(assistantMessage(chatKey, 'a1', 'hello'))).toBe(0);
  });

  it('counts toward the token budget: the compressor keeps fewer messages than their stored counts alone allow', () => {
    const messages = Array.from({ length: 20 }, (_, i) =>
      counted(userMessage(chatKey, `u${i}`, `message ${i}`)),
    );
    const stored = messages.reduce((s, m) => s + (m.metadata.tokens ?? 0), 0);
    const plain = new TokenBudgetCompressor({ maxCharsPerMessage: 4000 }).compress(messages, stored);
    const viewed = new TokenBudgetCompressor({
      maxCharsPerMessage: 4000,
      overheadTokens: contextBlockTokens,
    });
    const result = viewed.compress(messages, stored);
    expect(plain.messages).toHaveLength(20);
    expect(result.messages.length).toBeLessThan(20);
    expect(result.report.keptTokens).toBeLessThanOrEqual(stored);
  });
});

describe('the hard token cut', () => {
  it('moves in steps: while the chat grows, the first kept message changes only every few turns, within the budget', () => {
    const stepped = new TokenBudgetCompressor({ maxCharsPerMessage: 4000, cutStep: 8 });
    const least = new TokenBudgetCompressor({ maxCharsPerMessage: 4000 });
    const all = Array.from({ length: 80 }, (_, i) =>
      counted(userMessage(chatKey, `u${i}`, `message number ${i}`)),
    );
    const budget = all.slice(0, 20).reduce((s, m) => s + (m.metadata.tokens ?? 0), 0);
    const firsts = new Set<string>();
    const leastFirsts = new Set<string>();
    for (let n = 30; n <= 80; n++) {
      const out = stepped.compress(all.slice(0, n), budget);
      expect(out.report.keptTokens).toBeLessThanOrEqual(budget);
      expect(out.messages.at(-1)!.id).toBe(`u${n - 1}`);
      expect(Number(out.messages[0]!.id.slice(1)) % 8).toBe(0);
      firsts.add(out.messages[0]!.id);
      leastFirsts.add(least.compress(all.slice(0, n), budget).messages[0]!.id);
    }
    expect(leastFirsts.size).toBe(51);
    expect(firsts.size).toBeLessThanOrEqual(8);
  });
});

describe('the assembled request', () => {
  const a = new DefaultAssembler({ maxSendsPerTurn: 3 });
  const context = { chatKey, channel: 'telegram', chatId: '42' };

  it("sends the static part first with Anthropic's cache point, then the chat's part", () => {
    const [staticPart, chatPart] = a.systemMessages(context);
    expect(staticPart).toMatchObject({ role: 'system', providerOptions: CACHE_POINT });
    expect(staticPart!.content).not.toContain(chatKey);
    expect(chatPart).toEqual({
      role: 'system',
      content: `## Runtime context\nChatKey: ${chatKey}\nChannel: telegram\nChatId: 42`,
    });
    // Another chat shares the static part byte for byte.
    expect(a.systemMessages({ chatKey: 'other' })[0]).toEqual(staticPart);
  });

  it("puts cache points on the history's last message and on the input's last message, and nowhere else", async () => {
    const history = [
      userMessage(chatKey, 'u1', 'first', { ts: at }),
      assistantMessage(chatKey, 'a1', 'answer', { ts: at }),
    ];
    const turn = [
      userMessage(chatKey, 'u2', 'second', { ts: at }),
      userMessage(chatKey, 'u3', 'third', { ts: at }),
    ];
    const { messages } = await a.assemble({ context, messages: [...history, ...turn], historyCount: 2 });
    expect(messages.map((m) => m.providerOptions)).toEqual([undefined, CACHE_POINT, undefined, CACHE_POINT]);
    // A first turn has no history: only the input's end.
    const first = await a.assemble({ context, messages: turn, historyCount: 0 });
    expect(first.messages.map((m) => m.providerOptions)).toEqual([undefined, CACHE_POINT]);
  });

  it('shows a message the same in every turn that carries it (the next turn extends this one)', async () => {
    const u1 = userMessage(chatKey, 'u1', 'first', { ts: at, username: 'alice' });
    const a1 = assistantMessage(chatKey, 'a1', 'answer', { ts: at + 1000 });
    const u2 = userMessage(chatKey, 'u2', 'second', { ts: at + 60_000, username: 'bob' });
    const one = await a.assemble({ context, messages: [u1], historyCount: 0 });
    const two = await a.assemble({ context, messages: [u1, a1, u2], historyCount: 2 });
    const strip = (m: object) => JSON.stringify({ ...m, providerOptions: undefined });
    expect(two.system).toEqual(one.system);
    expect(strip(two.messages[0]!)).toBe(strip(one.messages[0]!));
    expect(JSON.stringify(two.messages[2])).toContain('[sent 2026-11-26T07:09:09Z by bob]\\nsecond');
  });

  it('names the chat as the OpenAI prompt cache key', () => {
    expect(cacheKeyOptions(chatKey)).toEqual({ openai: { promptCacheKey: chatKey } });
  });
});

describe('the history window', () => {
  it('moves in quarter steps: it holds between size - step + 1 and size messages, and starts anew only every step', () => {
    expect(windowStep(200)).toBe(50);
    expect(windowStep(3)).toBe(1);
    const starts: number[] = [];
    for (let total = 0; total <= 600; total++) {
      const start = windowStart(total, 200, 50);
      const held = total - start;
      expect(held).toBeLessThanOrEqual(200);
      expect(held).toBeGreaterThanOrEqual(Math.min(total, 151));
      if (start !== starts.at(-1)) starts.push(start);
    }
    expect(starts).toEqual([0, 50, 100, 150, 200, 250, 300, 350, 400]);
  });
});

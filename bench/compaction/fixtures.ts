import type { LanguageModelV4Prompt } from '@ai-sdk/provider';
import { MockLanguageModelV4 } from 'ai/test';
import { type Config, loadConfig } from '../../src/shared/config.js';
import type { ChatMessage } from '../../src/shared/messages.js';
import { countTextTokens } from '../../src/shared/tokens.js';
import { usage } from '../lib/echo-model.js';
import { prng, REDIS_URL, sleep } from '../lib/util.js';
import { LLM_ENV } from './options.js';

/** The compaction benchmark's texts and models: deterministic filler, a fixed summary, the token count of a prompt. */

// Deterministic filler prose: the same texts in every mode and run.
const WORDS = (
  'the deploy window moved to friday because the database migration needs a quiet hour and ' +
  'support asked for a heads up before we switch traffic to the new region please confirm the ' +
  'rollback plan and who is on call while invoices are regenerated overnight for every customer ' +
  'Anna prefers the Berlin office on Tuesday budget 4200 euros ticket 1873 design review at noon'
).split(' ');

/** Message `i`: numbered filler text of at least `tokens` tokens (one or two over at most). */
export function filler(i: number, tokens: number): string {
  const rand = prng(1000 + i);
  const words = [`message ${i}:`];
  while (countTextTokens(words.join(' ')) < tokens) words.push(WORDS[Math.floor(rand() * WORDS.length)]!);
  return words.join(' ');
}

export function summaryText(tokens: number): string {
  const rand = prng(7);
  const sections = [
    'Goals and requests',
    'Facts and user preferences',
    'Decisions',
    'Open items',
    'Lookup hints',
  ];
  const lines: string[] = [];
  let s = 0;
  while (countTextTokens(lines.join('\n')) < tokens) {
    if (s < sections.length && lines.length % 3 === 0) lines.push(`## ${sections[s++]}`);
    lines.push(`- ${Array.from({ length: 6 }, () => WORDS[Math.floor(rand() * WORDS.length)]).join(' ')}`);
  }
  return lines.join('\n');
}

/**
 * What the model receives, counted as `src/shared/tokens.ts` counts stored messages: the
 * text of every part (system prompt, text, tool-call name and input JSON, tool-result output
 * JSON) through gpt-tokenizer, plus 4 per message. Tool definitions are not counted (the
 * worker reserves 400 tokens for them).
 */
export function promptTokens(prompt: LanguageModelV4Prompt): number {
  const texts: string[] = [];
  for (const m of prompt) {
    if (m.role === 'system') {
      texts.push(m.content);
      continue;
    }
    for (const p of m.content as Array<{
      type: string;
      text?: string;
      toolName?: string;
      input?: unknown;
      output?: unknown;
    }>) {
      if (p.type === 'text' || p.type === 'reasoning') texts.push(p.text ?? '');
      else if (p.type === 'tool-call') texts.push(p.toolName ?? '', JSON.stringify(p.input ?? null));
      else if (p.type === 'tool-result') texts.push(JSON.stringify(p.output ?? null));
    }
  }
  return countTextTokens(texts.join('\n')) + 4 * prompt.length;
}

/** The summariser: a fixed ~`tokens`-token summary after `latencyMs`. */
export function summariserModel(text: string, latencyMs: number) {
  let calls = 0;
  const model: MockLanguageModelV4 = new MockLanguageModelV4({
    doGenerate: async () => {
      model.doGenerateCalls.length = 0;
      calls++;
      if (latencyMs > 0) await sleep(latencyMs);
      return {
        content: [{ type: 'text' as const, text }],
        finishReason: { unified: 'stop' as const, raw: 'stop' },
        usage,
        warnings: [],
      };
    },
  });
  return { model, calls: () => calls };
}

/** An assistant message shaped like the worker commits it (one `chat_send` call). */
export function assistantMessage(chatKey: string, id: string, text: string): ChatMessage {
  return {
    id,
    role: 'assistant',
    parts: [
      { type: 'step-start' },
      {
        type: 'tool-chat_send',
        toolCallId: `call-${id}`,
        state: 'output-available',
        input: { text: `echo: ${text}` },
        output: { status: 'sent', id: '1700000000000-0' },
      },
      { type: 'step-start' },
    ],
    metadata: { ts: Date.now(), chatKey, runId: `seed-${id}`, kind: 'normal' },
  } as ChatMessage;
}

export const limits = { maxPending: 1000, dedupWindowMs: 600_000 };

export function benchConfig(prefix: string, env: Record<string, string>): Config {
  return loadConfig({ REDIS_URL, CHATLANE_PREFIX: prefix, ...LLM_ENV, ...env });
}

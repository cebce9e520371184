import { asSchema, type ModelMessage } from 'ai';
import { describe, expect, it } from 'vitest';
import type { ChatMessage } from '../../src/shared/messages.js';
import { countTextTokens } from '../../src/shared/tokens.js';
import { ChatTools } from '../../src/worker/agent/tools/chat-tools.js';
import { DefaultAssembler, SUMMARY_HEADER, SUMMARY_RULE } from '../../src/worker/pipeline/assembler.js';
import { BUDGET_LINE } from '../../src/worker/pipeline/sections.js';
import type { AssembleInput, RuntimeContext } from '../../src/worker/pipeline/types.js';
import { assistantMessage, userMessage } from '../helpers/messages.js';

const chatKey = 'telegram-chat-42';

const context: RuntimeContext = { chatKey, channel: 'telegram', chatId: '42' };

function assembler(operatorPrompt?: string): DefaultAssembler {
  return new DefaultAssembler({ operatorPrompt, maxSendsPerTurn: 3 });
}

/** `assemble` with its system messages as the one text they make up. */
async function assembled(a: DefaultAssembler, input: AssembleInput) {
  const { system, messages } = await a.assemble(input);
  return { system: system.map((m) => m.content).join('\n\n'), messages };
}

/** A user message's text without the context block chatlane puts first. */
function withoutBlock(text: string): string {
  return text.replace(/^\[sent [^\]]*\]\n/, '');
}

/** The plain text of a model message (text content only). */
function contentText(message: ModelMessage): string {
  if (typeof message.content === 'string') return message.content;
  return message.content.map((part) => (part.type === 'text' ? part.text : '')).join('');
}

/** The characters of `text` outside ASCII. */
function nonAscii(text: string): string[] {
  return [...text].filter((c) => c.charCodeAt(0) > 0x7f);
}

describe('DefaultAssembler system prompt', () => {
  it("contains the exact ChatKey line and the chat's runtime context, but no clock and no sender", async () => {
    const { system } = await assembled(assembler(), { context, messages: [] });
    const lines = system.split('\n');
    expect(lines).toContain(`ChatKey: ${chatKey}`);
    expect(lines).toContain('Channel: telegram');
    expect(lines).toContain('ChatId: 42');
    // Both change from turn to turn: each user message carries its own (request-cache.ts).
    expect(system).not.toMatch(/^(Time|User):/m);
  });

  it('omits the optional runtime lines when the context lacks them', async () => {
    const bare: RuntimeContext = { chatKey: 'k1' };
    const { system } = await assembled(assembler(), { context: bare, messages: [] });
    const lines = system.split('\n');
    expect(lines).toContain('ChatKey: k1');
    expect(system).not.toMatch(/^Channel:/m);
    expect(system).not.toMatch(/^ChatId:/m);
    expect(system).not.toMatch(/^User:/m);
  });

  it('includes the trimmed operator prompt under an Instructions section when given', async () => {
    const { system } = await assembled(assembler('  Always answer like a pirate.\n'), {
      context,
      messages: [],
    });
    expect(system).toContain('## Instructions\nAlways answer like a pirate.');
  });

  it('has no Instructions section when no operator prompt is given or it is blank', async () => {
    for (const prompt of [undefined, '', '   \n']) {
      const { system } = await assembled(assembler(prompt), { context, messages: [] });
      expect(system).not.toContain('## Instructions');
      expect(system).toContain('## Output rules');
    }
  });

  it('states the per-turn send limit from its options', async () => {
    const { system } = await assembled(new DefaultAssembler({ maxSendsPerTurn: 9 }), {
      context,
      messages: [],
    });
    expect(system).toContain('Send at most 9 messages per turn');
  });

  it('never folds history text into the system prompt', async () => {
    const messages = [
      userMessage(chatKey, 'u1', 'zanzibar quokka marmalade'),
      assistantMessage(chatKey, 'a1', 'periwinkle xylophone'),
      assistantMessage(chatKey, 's1', 'obsidian tangerine', { kind: 'summary' }),
    ];
    const { system, messages: out } = await assembled(assembler('Be brief.'), { context, messages });
    for (const word of [
      'zanzibar',
      'quokka',
      'marmalade',
      'periwinkle',
      'xylophone',
      'obsidian',
      'tangerine',
    ]) {
      expect(system).not.toContain(word);
    }
    // The words are not lost: they live in the messages.
    const all = out.map(contentText).join('\n');
    expect(all).toContain('zanzibar quokka marmalade');
    expect(all).toContain('periwinkle xylophone');
    expect(all).toContain('obsidian tangerine');
  });

  it('explains the summary header only when the history starts with a summary', async () => {
    const a = assembler();
    const plain = a.systemPrompt(context);
    const summarized = a.systemPrompt({ ...context, summarized: true });
    expect(plain).not.toContain(SUMMARY_HEADER);
    expect(plain).not.toContain(SUMMARY_RULE);
    expect(summarized.split('\n')).toContain(SUMMARY_RULE);
    expect(SUMMARY_RULE).toContain(`"${SUMMARY_HEADER}"`);
    // The rule sits among the output rules, before the last one.
    expect(summarized).toMatch(
      /## Output rules\n(- .*\n)+- A message starting with .*\n- Once you have replied/,
    );
    // Both variants are counted as sent: the summary rule's tokens only in the summarized one.
    const plainTokens = a.systemTokens(context);
    const summarizedTokens = a.systemTokens({ ...context, summarized: true });
    expect(Math.abs(plainTokens - countTextTokens(plain))).toBeLessThanOrEqual(4);
    expect(Math.abs(summarizedTokens - countTextTokens(summarized))).toBeLessThanOrEqual(4);
    expect(summarizedTokens - plainTokens).toBe(countTextTokens(summarized) - countTextTokens(plain));
  });

  it('counts exactly the tokens of the system prompt it sends, in every variant', () => {
    const options = [
      { maxSendsPerTurn: 3 },
      {
        maxSendsPerTurn: 3,
        operatorPrompt: 'Be brief.\nAnswer in the language of the user',
        profile: 'I am Ada.',
        skills: [{ name: 'weather', description: 'Answer weather questions.' }],
      },
    ];
    const contexts: RuntimeContext[] = [
      context,
      { chatKey: 'k1' },
      { ...context, memory: 'likes tea\n\n- and cake' },
      { ...context, summarized: true, offered: ['chat_send', 'chat_memory_update'] },
      { ...context, memory: 'x', offered: ['chat_send', 'chat_context_new', 'chat_history_search'] },
    ];
    for (const opts of options) {
      const a = new DefaultAssembler(opts);
      for (const c of contexts) expect(a.systemTokens(c)).toBe(countTextTokens(a.systemPrompt(c)));
    }
  });

  it('puts the static sections first and the per-turn ones last, the budget line at the end', () => {
    const a = new DefaultAssembler({
      operatorPrompt: 'Be brief.',
      maxSendsPerTurn: 3,
      profile: 'I am Ada.',
      skills: [{ name: 'weather', description: 'Answer weather questions.' }],
    });
    const system = a.systemPrompt({ ...context, memory: 'likes tea', summarized: true }, true);
    const order = [
      'You are an assistant',
      '## Profile\nI am Ada.',
      '## Skills',
      '## Instructions\nBe brief.',
      '## Output rules',
      SUMMARY_RULE,
      '## Working context',
      '## Runtime context\nChatKey: ',
      '## Memory of this chat',
      BUDGET_LINE,
    ].map((s) => system.indexOf(s));
    expect(order[0]).toBe(0);
    expect(order.every((at, i) => at > -1 && (i === 0 || at > order[i - 1]!))).toBe(true);
    expect(system.endsWith(BUDGET_LINE)).toBe(true);
  });

  it('gives every chat and turn the same static part as a common prefix, up to the runtime context', () => {
    const a = new DefaultAssembler({
      operatorPrompt: 'You are the help desk of Example Ltd.\nAnswer in the language of the user.',
      maxSendsPerTurn: 3,
      profile: 'I am Ada, the shop assistant.',
      skills: [
        { name: 'refunds', description: 'Handle refund requests.' },
        { name: 'weather', description: 'Answer weather questions.' },
      ],
    });
    const first = a.systemPrompt({ ...context, memory: 'prefers tea' });
    const second = a.systemPrompt({
      chatKey: 'slack-team-7',
      channel: 'slack',
      chatId: '7',
      memory: 'vegetarian',
    });
    let common = 0;
    while (common < first.length && first[common] === second[common]) common++;
    const runtimeAt = first.indexOf('## Runtime context');
    // The shared prefix ends only inside the runtime context, at the chat key (the first byte
    // that differs between the two turns): everything before it is cacheable by the provider.
    expect(second.indexOf('## Runtime context')).toBe(runtimeAt);
    expect(first.slice(0, common)).toBe(`${first.slice(0, runtimeAt)}## Runtime context\nChatKey: `);
    const shared = first.slice(0, runtimeAt);
    for (const part of [
      'I am Ada',
      '- refunds:',
      'Answer in the language',
      '## Output rules',
      '## Working context',
    ]) {
      expect(shared).toContain(part);
    }
    for (const perTurn of ['prefers tea', 'vegetarian', 'Time:', 'User:'])
      expect(shared).not.toContain(perTurn);
  });

  it('is plain ASCII, so the prompt and every request body built from it stay one-byte strings', async () => {
    const { system } = await assembled(assembler('Be brief.'), {
      context: { ...context, summarized: true },
      messages: [],
    });
    // V8 stores a string with any character above U+00FF in two bytes per character.
    expect(nonAscii(system)).toEqual([]);
    expect(nonAscii(SUMMARY_HEADER)).toEqual([]);
  });

  it('describes every tool in plain ASCII (the descriptions and schemas go into every request body)', () => {
    const everything = { archived: 1, contexts: 1 };
    const { tools, active } = new ChatTools({ memoryMaxTokens: 1000 }).forTurn(everything);
    expect(active).toHaveLength(7);
    for (const [name, t] of Object.entries(tools)) {
      const schema = JSON.stringify(asSchema(t.inputSchema).jsonSchema);
      expect(nonAscii(`${t.description}${schema}`), name).toEqual([]);
    }
  });
});

describe('DefaultAssembler messages', () => {
  it('keeps input order and maps user and assistant text to their roles', async () => {
    const messages = [
      userMessage(chatKey, 'u1', 'first question'),
      assistantMessage(chatKey, 'a1', 'first answer'),
      userMessage(chatKey, 'u2', 'second question'),
      userMessage(chatKey, 'u3', 'third question'),
      assistantMessage(chatKey, 'a2', 'second answer'),
    ];
    const { messages: out } = await assembled(assembler(), { context, messages });
    expect(out.map((m) => [m.role, withoutBlock(contentText(m))])).toEqual([
      ['user', 'first question'],
      ['assistant', 'first answer'],
      ['user', 'second question'],
      ['user', 'third question'],
      ['assistant', 'second answer'],
    ]);
  });

  it('gives an empty message list for an empty history', async () => {
    const { messages } = await assembled(assembler(), { context, messages: [] });
    expect(messages).toEqual([]);
  });

  it('shows a summary message with the summary header before its text', async () => {
    const summary = assistantMessage(chatKey, 's1', 'They discussed the weather.', { kind: 'summary' });
    const { messages } = await assembled(assembler(), {
      context,
      messages: [summary, userMessage(chatKey, 'u1', 'and now?')],
    });
    expect(messages).toHaveLength(2);
    expect(messages[0]!.role).toBe('assistant');
    expect(contentText(messages[0]!)).toBe(`${SUMMARY_HEADER}\nThey discussed the weather.`);
    expect(withoutBlock(contentText(messages[1]!))).toBe('and now?');
  });

  it('does not add the summary header to ordinary messages nor mutate the input summary', async () => {
    const summary = assistantMessage(chatKey, 's1', 'Old talk.', { kind: 'summary' });
    const snapshot = structuredClone(summary);
    const { messages } = await assembled(assembler(), {
      context,
      messages: [summary, assistantMessage(chatKey, 'a1', 'Plain reply.')],
    });
    expect(contentText(messages[1]!)).toBe('Plain reply.');
    expect(summary).toEqual(snapshot);
  });

  it('turns an assistant tool part into a tool call followed by its tool result', async () => {
    const withTool: ChatMessage = {
      id: 'a1',
      role: 'assistant',
      parts: [
        { type: 'step-start' },
        {
          type: 'tool-chat_send',
          toolCallId: 'c1',
          state: 'output-available',
          input: { text: 'hi' },
          output: { status: 'sent', id: '1-0' },
        },
      ],
      metadata: { ts: 1, chatKey, kind: 'normal' },
    };
    const { messages } = await assembled(assembler(), {
      context,
      messages: [userMessage(chatKey, 'u1', 'hello'), withTool],
    });
    expect(messages.map((m) => m.role)).toEqual(['user', 'assistant', 'tool']);
    expect(messages[1]!.content).toEqual([
      { type: 'tool-call', toolCallId: 'c1', toolName: 'chat_send', input: { text: 'hi' } },
    ]);
    expect(messages[2]!.content).toEqual([
      {
        type: 'tool-result',
        toolCallId: 'c1',
        toolName: 'chat_send',
        output: { type: 'json', value: { status: 'sent', id: '1-0' } },
      },
    ]);
  });
});

import { z } from 'zod';
import { countTextTokens as countTokens } from '../shared/tokens.js';
import { NO_CHAT_KEY } from './state.js';

/**
 * The deterministic "model": request schema, what to answer, and the OpenAI Chat
 * Completions wire shapes of that answer (one JSON body, or SSE chunks).
 */

// Loose on purpose: real clients send fields we do not care about, and a mock that
// rejects them would fail in ways a real endpoint does not.
const contentPartSchema = z.looseObject({ type: z.string(), text: z.string().optional() });
const contentSchema = z.union([z.string(), z.array(contentPartSchema)]).nullish();

const toolCallSchema = z.looseObject({
  id: z.string().optional(),
  type: z.string().optional(),
  function: z.looseObject({ name: z.string(), arguments: z.string().optional() }),
});

const messageSchema = z.looseObject({
  role: z.string().min(1),
  content: contentSchema,
  tool_calls: z.array(toolCallSchema).nullish(),
});

export const chatCompletionRequestSchema = z.looseObject({
  model: z.string(),
  messages: z.array(messageSchema).min(1),
  tools: z
    .array(z.looseObject({ type: z.string(), function: z.looseObject({ name: z.string() }).optional() }))
    .nullish(),
  stream: z.boolean().nullish(),
  stream_options: z.looseObject({ include_usage: z.boolean().nullish() }).nullish(),
});

export type ChatCompletionRequest = z.infer<typeof chatCompletionRequestSchema>;
type Message = ChatCompletionRequest['messages'][number];

export type MockReply =
  | { kind: 'text'; content: string }
  | { kind: 'tool'; id: string; name: string; arguments: string };

export interface Usage {
  prompt_tokens: number;
  completion_tokens: number;
  total_tokens: number;
  /** As OpenAI reports prompt-cache reads (prompt-cache.ts). */
  prompt_tokens_details: { cached_tokens: number };
}

const CHAT_KEY_LINE = /^ChatKey:[ \t]*(\S+)/m;
/** The context block chatlane starts a user message with (when, from whom): not the user's words. */
const CONTEXT_BLOCK = /^\[sent [^\]\n]*\]\n?/;
const SUMMARY_HINT = /summar/i;
const SUMMARY_CHARS = 300;
const CHAT_SEND = 'chat_send';
const SKILLS_LOAD = 'skills_load';
/** A user asking for a skill by name ("… skill: weather …") makes the mock load it first. */
const SKILL_REQUEST = /\bskill:\s*([A-Za-z0-9_-]+)/i;

export function messageText(message: Message): string {
  const { content } = message;
  if (content == null) return '';
  if (typeof content === 'string') return content;
  return content
    .filter((p) => p.type === 'text' && typeof p.text === 'string')
    .map((p) => p.text)
    .join('\n');
}

function isSystem(message: Message): boolean {
  return message.role === 'system' || message.role === 'developer';
}

export function chatKeyOf(request: ChatCompletionRequest): string {
  for (const message of request.messages) {
    if (!isSystem(message)) continue;
    const match = CHAT_KEY_LINE.exec(messageText(message));
    if (match?.[1]) return match[1];
  }
  return NO_CHAT_KEY;
}

export function toolNames(request: ChatCompletionRequest): string[] {
  return (request.tools ?? []).flatMap((t) => (t.type === 'function' && t.function ? [t.function.name] : []));
}

export function promptTokens(request: ChatCompletionRequest): number {
  let total = 0;
  for (const message of request.messages) total += messageTokens(message);
  return total;
}

/** One message's share of `promptTokens`. */
export function messageTokens(message: Message): number {
  let total = countTokens(messageText(message));
  for (const call of message.tool_calls ?? []) {
    total += countTokens(call.function.name + (call.function.arguments ?? ''));
  }
  return total;
}

export function completionTokens(reply: MockReply): number {
  return reply.kind === 'text' ? countTokens(reply.content) : countTokens(reply.name + reply.arguments);
}

let idCounter = 0;
function nextId(prefix: string): string {
  idCounter += 1;
  return `${prefix}${Date.now().toString(36)}${idCounter.toString(36)}`;
}

/** Texts of the user messages between the assistant message before `end` and `end`. */
function freshUserTexts(messages: Message[], end = messages.length): string[] {
  const lastAssistant = messages.slice(0, end).findLastIndex((m) => m.role === 'assistant');
  return messages
    .slice(lastAssistant + 1, end)
    .filter((m) => m.role === 'user')
    .map(userText);
}

/** What the user wrote: the text without chatlane's context block. */
function userText(message: Message): string {
  return messageText(message).replace(CONTEXT_BLOCK, '');
}

function toolCall(name: string, args: unknown): MockReply {
  return { kind: 'tool', id: nextId('call_'), name, arguments: JSON.stringify(args) };
}

/** The skill a `skills_load` call just answered (the assistant message before the tool result). */
function loadedSkill(messages: Message[]): string | undefined {
  const call = messages.at(-2)?.tool_calls?.find((c) => c.function.name === SKILLS_LOAD);
  if (!call) return undefined;
  try {
    return String((JSON.parse(call.function.arguments ?? '{}') as { name?: unknown }).name);
  } catch {
    return undefined;
  }
}

export function decideReply(request: ChatCompletionRequest): MockReply {
  const { messages } = request;
  const last = messages[messages.length - 1];
  const tools = toolNames(request);
  if (last?.role === 'tool') {
    // A skill was loaded for the user's messages: now answer them, saying which skill was used.
    const skill = loadedSkill(messages);
    if (skill && tools.includes(CHAT_SEND)) {
      const fresh = freshUserTexts(messages, messages.length - 2);
      return toolCall(CHAT_SEND, { text: `echo: ${fresh.join(' | ')} (with skill ${skill})` });
    }
    // Tool results are back: the model has said what it had to say, the turn ends.
    return { kind: 'text', content: '' };
  }

  if (tools.includes(CHAT_SEND)) {
    const fresh = freshUserTexts(messages);
    const skill = tools.includes(SKILLS_LOAD) ? SKILL_REQUEST.exec(fresh.join('\n'))?.[1] : undefined;
    if (skill) return toolCall(SKILLS_LOAD, { name: skill });
    return toolCall(CHAT_SEND, { text: `echo: ${fresh.join(' | ')}` });
  }

  const system = messages.filter(isSystem).map(messageText).join('\n');
  const lastUser = messages.findLast((m) => m.role === 'user');
  const lastUserText = lastUser ? userText(lastUser) : '';
  if (SUMMARY_HINT.test(system) || SUMMARY_HINT.test(lastUserText)) {
    const dialogue = messages
      .filter((m) => m.role === 'user' || m.role === 'assistant')
      .map(messageText)
      .filter((t) => t !== '')
      .join('\n');
    return { kind: 'text', content: `## Summary\n${dialogue.slice(0, SUMMARY_CHARS)}` };
  }
  return { kind: 'text', content: `echo: ${lastUserText}` };
}

function usageOf(prompt: number, reply: MockReply, cached: number): Usage {
  const completion = completionTokens(reply);
  return {
    prompt_tokens: prompt,
    completion_tokens: completion,
    total_tokens: prompt + completion,
    prompt_tokens_details: { cached_tokens: cached },
  };
}

function finishReason(reply: MockReply): 'stop' | 'tool_calls' {
  return reply.kind === 'tool' ? 'tool_calls' : 'stop';
}

export function completionBody(model: string, prompt: number, reply: MockReply, cached = 0) {
  const message =
    reply.kind === 'text'
      ? { role: 'assistant' as const, content: reply.content }
      : {
          role: 'assistant' as const,
          content: null,
          tool_calls: [
            {
              id: reply.id,
              type: 'function' as const,
              function: { name: reply.name, arguments: reply.arguments },
            },
          ],
        };
  return {
    id: nextId('chatcmpl-'),
    object: 'chat.completion' as const,
    created: Math.floor(Date.now() / 1000),
    model,
    choices: [{ index: 0, message, logprobs: null, finish_reason: finishReason(reply) }],
    usage: usageOf(prompt, reply, cached),
  };
}

/** Splits into a few pieces so clients exercise their delta accumulation. */
function pieces(text: string, size = 8): string[] {
  if (text === '') return [];
  const out: string[] = [];
  for (let i = 0; i < text.length; i += size) out.push(text.slice(i, i + size));
  return out;
}

/** The SSE `data:` payloads for one streamed answer, in order, without the `[DONE]` sentinel. */
export function completionChunks(
  model: string,
  prompt: number,
  reply: MockReply,
  includeUsage: boolean,
  cached = 0,
) {
  const id = nextId('chatcmpl-');
  const created = Math.floor(Date.now() / 1000);
  // OpenAI sends `usage: null` on every chunk but the last when usage was asked for.
  const usageField = includeUsage ? { usage: null } : {};
  const chunk = (delta: Record<string, unknown>, finish: string | null = null) => ({
    id,
    object: 'chat.completion.chunk' as const,
    created,
    model,
    choices: [{ index: 0, delta, logprobs: null, finish_reason: finish }],
    ...usageField,
  });

  const chunks: object[] = [];
  if (reply.kind === 'text') {
    chunks.push(chunk({ role: 'assistant', content: '' }));
    for (const piece of pieces(reply.content)) chunks.push(chunk({ content: piece }));
  } else {
    chunks.push(
      chunk({
        role: 'assistant',
        content: null,
        tool_calls: [
          { index: 0, id: reply.id, type: 'function', function: { name: reply.name, arguments: '' } },
        ],
      }),
    );
    for (const piece of pieces(reply.arguments, 16)) {
      chunks.push(chunk({ tool_calls: [{ index: 0, function: { arguments: piece } }] }));
    }
  }
  chunks.push(chunk({}, finishReason(reply)));
  if (includeUsage) {
    chunks.push({
      id,
      object: 'chat.completion.chunk',
      created,
      model,
      choices: [],
      usage: usageOf(prompt, reply, cached),
    });
  }
  return chunks;
}

import { countTextTokens as countTokens } from '../shared/tokens.js';
import { NO_CHAT_KEY } from './state.js';

/**
 * The deterministic "model" every wire protocol shares: what to answer a conversation, in
 * a form of its own that each protocol adapter (chat-completions.ts, responses.ts,
 * anthropic.ts, gemini.ts) converts its request to and its answer from. The scripted
 * behaviour (reply through chat_send, skills, `$ command` through exec_shell, summaries)
 * lives only here.
 */

export interface MockToolCall {
  name: string;
  /** The call's arguments as JSON text. */
  arguments: string;
}

/** One message of a conversation, whatever protocol carried it. */
export interface MockMessage {
  role: 'system' | 'user' | 'assistant' | 'tool';
  text: string;
  toolCalls?: MockToolCall[];
}

/** What a protocol adapter reads out of a request. */
export interface MockRequest {
  model: string;
  messages: MockMessage[];
  /** Names of the function tools offered. */
  tools: string[];
  stream: boolean;
  /** The request's messages exactly as received, for the recordings. */
  raw: unknown[];
}

export type MockReply =
  | { kind: 'text'; content: string }
  | { kind: 'tool'; id: string; name: string; arguments: string };

/** Token counts of one answer; each protocol names them its own way. */
export interface MockUsage {
  input: number;
  output: number;
  /** Input tokens the chat's previous request had as a prefix (prompt-cache.ts). */
  cachedInput: number;
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
/**
 * A user asking for an offered tool by name, with its input as JSON on the same line
 * ("… tool: lookup {"id":"42"}"; `{}` without one), makes the mock call it first, then say
 * what it returned through chat_send.
 */
const TOOL_REQUEST = /\btool:\s*([A-Za-z0-9_-]+)(?:[ \t]+(\{[^\n]*\}))?/i;
const EXEC_SHELL = 'exec_shell';
/** A user message starting with `$ ` is a command: the mock runs it with exec_shell, when offered. */
const SHELL_REQUEST = /^\$ ([\s\S]+)$/;
/** How much of a command's result the mock's reply quotes. */
const SHELL_REPLY_CHARS = 2000;

export function chatKeyOf(messages: readonly MockMessage[]): string {
  for (const message of messages) {
    if (message.role !== 'system') continue;
    const match = CHAT_KEY_LINE.exec(message.text);
    if (match?.[1]) return match[1];
  }
  return NO_CHAT_KEY;
}

export function promptTokens(messages: readonly MockMessage[]): number {
  let total = 0;
  for (const message of messages) total += messageTokens(message);
  return total;
}

/** One message's share of `promptTokens`. */
export function messageTokens(message: MockMessage): number {
  let total = countTokens(message.text);
  for (const call of message.toolCalls ?? []) total += countTokens(call.name + call.arguments);
  return total;
}

export function completionTokens(reply: MockReply): number {
  return reply.kind === 'text' ? countTokens(reply.content) : countTokens(reply.name + reply.arguments);
}

export function usageOf(prompt: number, reply: MockReply, cached = 0): MockUsage {
  return { input: prompt, output: completionTokens(reply), cachedInput: cached };
}

let idCounter = 0;
export function nextId(prefix: string): string {
  idCounter += 1;
  return `${prefix}${Date.now().toString(36)}${idCounter.toString(36)}`;
}

/** Splits into a few pieces so clients exercise their delta accumulation. */
export function pieces(text: string, size = 8): string[] {
  if (text === '') return [];
  const out: string[] = [];
  for (let i = 0; i < text.length; i += size) out.push(text.slice(i, i + size));
  return out;
}

/** JSON text of a tool call's arguments, for protocols that carry them as an object. */
export function argumentsObject(reply: Extract<MockReply, { kind: 'tool' }>): unknown {
  return JSON.parse(reply.arguments) as unknown;
}

/** Texts of the user messages between the assistant message before `end` and `end`. */
function freshUserTexts(messages: readonly MockMessage[], end = messages.length): string[] {
  const lastAssistant = messages.slice(0, end).findLastIndex((m) => m.role === 'assistant');
  return messages
    .slice(lastAssistant + 1, end)
    .filter((m) => m.role === 'user')
    .map(userText);
}

/** What the user wrote: the text without chatlane's context block. */
function userText(message: MockMessage): string {
  return message.text.replace(CONTEXT_BLOCK, '');
}

function toolCall(name: string, args: unknown): MockReply {
  return { kind: 'tool', id: nextId('call_'), name, arguments: JSON.stringify(args) };
}

/** The JSON input of a requested tool call; `{}` when absent or not JSON. */
function toolInput(json: string | undefined): unknown {
  try {
    return json ? (JSON.parse(json) as unknown) : {};
  } catch {
    return {};
  }
}

/**
 * The requested tool (TOOL_REQUEST) the last results answer: its name and what it returned
 * (the result's text as the request carried it).
 */
function requestedToolResult(messages: readonly MockMessage[]): { name: string; result: string } | undefined {
  const before = messages.findLastIndex((m) => m.role !== 'tool');
  const call = messages[before]?.toolCalls?.find((c) => c.name !== SKILLS_LOAD && c.name !== CHAT_SEND);
  if (!call) return undefined;
  const asked = TOOL_REQUEST.exec(freshUserTexts(messages, before).join('\n'));
  if (asked?.[1] !== call.name) return undefined;
  return { name: call.name, result: messages.at(-1)?.text ?? '' };
}

/**
 * The skill a `skills_load` call just answered: the assistant message with the call, before
 * its result(s).
 */
function loadedSkill(messages: readonly MockMessage[]): string | undefined {
  const before = messages.findLastIndex((m) => m.role !== 'tool');
  const call = messages[before]?.toolCalls?.find((c) => c.name === SKILLS_LOAD);
  if (!call) return undefined;
  try {
    return String((JSON.parse(call.arguments || '{}') as { name?: unknown }).name);
  } catch {
    return undefined;
  }
}

/** Whether the tool results just back answer an `exec_shell` call (the assistant message before them). */
function ranCommand(messages: readonly MockMessage[]): boolean {
  const before = messages.findLastIndex((m) => m.role !== 'tool');
  return messages[before]?.toolCalls?.some((c) => c.name === EXEC_SHELL) ?? false;
}

export function decideReply(messages: readonly MockMessage[], tools: readonly string[]): MockReply {
  const last = messages[messages.length - 1];
  if (last?.role === 'tool') {
    // A command ran for the user: send its result (as the tool gave it) back through chat_send.
    if (ranCommand(messages) && tools.includes(CHAT_SEND))
      return toolCall(CHAT_SEND, { text: `shell: ${last.text.slice(0, SHELL_REPLY_CHARS)}` });
    // A skill was loaded for the user's messages: now answer them, saying which skill was used.
    const skill = loadedSkill(messages);
    if (skill && tools.includes(CHAT_SEND)) {
      const callAt = messages.findLastIndex((m) => m.role !== 'tool');
      const fresh = freshUserTexts(messages, callAt);
      return toolCall(CHAT_SEND, { text: `echo: ${fresh.join(' | ')} (with skill ${skill})` });
    }
    // A requested tool answered: say what it returned.
    const asked = requestedToolResult(messages);
    if (asked && tools.includes(CHAT_SEND)) {
      const callAt = messages.findLastIndex((m) => m.role !== 'tool');
      const fresh = freshUserTexts(messages, callAt);
      return toolCall(CHAT_SEND, {
        text: `echo: ${fresh.join(' | ')} (tool ${asked.name}: ${asked.result})`,
      });
    }
    // Tool results are back: the model has said what it had to say, the turn ends.
    return { kind: 'text', content: '' };
  }

  if (tools.includes(CHAT_SEND)) {
    const fresh = freshUserTexts(messages);
    const command = tools.includes(EXEC_SHELL) ? SHELL_REQUEST.exec(fresh.at(-1) ?? '')?.[1] : undefined;
    if (command) return toolCall(EXEC_SHELL, { command });
    const skill = tools.includes(SKILLS_LOAD) ? SKILL_REQUEST.exec(fresh.join('\n'))?.[1] : undefined;
    if (skill) return toolCall(SKILLS_LOAD, { name: skill });
    const asked = TOOL_REQUEST.exec(fresh.join('\n'));
    if (asked?.[1] && tools.includes(asked[1])) return toolCall(asked[1], toolInput(asked[2]));
    return toolCall(CHAT_SEND, { text: `echo: ${fresh.join(' | ')}` });
  }

  const system = messages
    .filter((m) => m.role === 'system')
    .map((m) => m.text)
    .join('\n');
  const lastUser = messages.findLast((m) => m.role === 'user');
  const lastUserText = lastUser ? userText(lastUser) : '';
  if (SUMMARY_HINT.test(system) || SUMMARY_HINT.test(lastUserText)) {
    const dialogue = messages
      .filter((m) => m.role === 'user' || m.role === 'assistant')
      .map((m) => m.text)
      .filter((t) => t !== '')
      .join('\n');
    return { kind: 'text', content: `## Summary\n${dialogue.slice(0, SUMMARY_CHARS)}` };
  }
  return { kind: 'text', content: `echo: ${lastUserText}` };
}

/** Text parts of a content that is a string or a list of `{ type, text }` parts. */
export function partsText(content: unknown, textTypes: readonly string[] = ['text']): string {
  if (content == null) return '';
  if (typeof content === 'string') return content;
  if (!Array.isArray(content)) return '';
  return content
    .filter(
      (p): p is { type: string; text: string } =>
        typeof p === 'object' &&
        p !== null &&
        textTypes.includes((p as { type?: unknown }).type as string) &&
        typeof (p as { text?: unknown }).text === 'string',
    )
    .map((p) => p.text)
    .join('\n');
}

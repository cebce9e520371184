import { z } from 'zod';

/**
 * A chatKey is 1-200 chars of [A-Za-z0-9._:@-]. No braces, so no key built from it can
 * escape its `{c:<chatKey>}` hash tag (DESIGN §3).
 */
export const CHAT_KEY_PATTERN = /^[A-Za-z0-9._:@-]{1,200}$/;

export const CHAT_KEY_RULE = "chatKey must be 1-200 characters of [A-Za-z0-9._:@-], and not '.' or '..'";

/**
 * `.` and `..` match the pattern but are path segments with a meaning of their own: a client,
 * proxy or URL library resolves `/v1/chats/../messages` to another path, so a chat with that
 * key could not be addressed reliably.
 */
export function isValidChatKey(value: string): boolean {
  return CHAT_KEY_PATTERN.test(value) && value !== '.' && value !== '..';
}

export const chatKeySchema = z.string().refine(isValidChatKey, CHAT_KEY_RULE);

/** Telegram chats and forum topics (seed 001 §6). */
export function telegramChatKey(chatId: number | string, threadId?: number | string): string {
  return threadId === undefined || threadId === null || threadId === ''
    ? `telegram-chat-${chatId}`
    : `telegram-chat-${chatId}-topic-${threadId}`;
}

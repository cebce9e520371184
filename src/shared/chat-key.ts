import { z } from 'zod';

/**
 * A chatKey is 1-200 chars of [A-Za-z0-9._:@-]. No braces, so no key built from it can
 * escape its `{c:<chatKey>}` hash tag (DESIGN §3).
 */
export const CHAT_KEY_PATTERN = /^[A-Za-z0-9._:@-]{1,200}$/;

export const chatKeySchema = z
  .string()
  .regex(CHAT_KEY_PATTERN, 'chatKey must be 1-200 characters of [A-Za-z0-9._:@-]');

export function isValidChatKey(value: string): boolean {
  return CHAT_KEY_PATTERN.test(value);
}

/** Telegram chats and forum topics (seed 001 §6). */
export function telegramChatKey(chatId: number | string, threadId?: number | string): string {
  return threadId === undefined || threadId === null || threadId === ''
    ? `telegram-chat-${chatId}`
    : `telegram-chat-${chatId}-topic-${threadId}`;
}

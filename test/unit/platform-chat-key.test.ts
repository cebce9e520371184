import { describe, expect, it } from 'vitest';
import { isValidChatKey } from '../../src/shared/chat-key.js';
import { escapeChatKeyPart, unescapeChatKeyPart } from '../../src/shared/platforms/chat-key.js';
import { telegramChatKeyOf, telegramThreadIdOf } from '../../src/shared/platforms/telegram.js';

describe('platform ids in chatKeys', () => {
  it('escape characters outside the chatKey set reversibly and keep plain ids as they are', () => {
    for (const id of [
      'C0123ABC',
      '1700000000.123456',
      'a b/c{d}_e',
      'spaces:and:colons',
      'ü🙂',
      '_5f',
      '%41',
    ]) {
      const part = escapeChatKeyPart(id);
      expect(isValidChatKey(`x-${part}`)).toBe(true);
      expect(unescapeChatKeyPart(part)).toBe(id);
    }
    expect(escapeChatKeyPart('C0123ABC')).toBe('C0123ABC');
    expect(escapeChatKeyPart('a_b c')).toBe('a_5fb_20c');
  });

  it('refuse to decode what escaping never produces', () => {
    expect(unescapeChatKeyPart('a_zz')).toBeUndefined();
    expect(unescapeChatKeyPart('a b')).toBeUndefined();
    expect(unescapeChatKeyPart('_ff')).toBeUndefined();
  });

  it('map Telegram chats and forum topics to the seeds’ chatKeys and back', () => {
    const cases: Array<[string, string]> = [
      ['telegram:42', 'telegram-chat-42'],
      ['telegram:-1001234567890', 'telegram-chat--1001234567890'],
      ['telegram:-1001234567890:7', 'telegram-chat--1001234567890-topic-7'],
      ['telegram:biz:conn_1/x:42', 'telegram-thread-telegram:biz:conn_5f1_2fx:42'],
    ];
    for (const [threadId, chatKey] of cases) {
      expect(telegramChatKeyOf(threadId)).toBe(chatKey);
      expect(isValidChatKey(chatKey)).toBe(true);
      expect(telegramThreadIdOf(chatKey)).toBe(threadId);
    }
    expect(telegramThreadIdOf('api-chat-1')).toBeUndefined();
  });
});

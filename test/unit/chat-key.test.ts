import { describe, expect, it } from 'vitest';
import {
  CHAT_KEY_PATTERN,
  chatKeySchema,
  isValidChatKey,
  telegramChatKey,
} from '../../src/shared/chat-key.js';

const valid = ['telegram-chat-123', 'a', 'k'.repeat(200), 'user@example.com', 'x:y.z_w-1'];

const invalid: Array<[label: string, value: string]> = [
  ['empty', ''],
  ['201 chars', 'k'.repeat(201)],
  ['an opening brace', 'a{b'],
  ['a closing brace', 'a}b'],
  ['a full hash tag', '{c:x}'],
  ['a space', 'a b'],
  ['a slash', 'a/b'],
  ['unicode', 'чат-1'],
  ['an emoji', 'chat-😀'],
  ['a newline inside', 'a\nb'],
  ['a trailing newline', 'abc\n'],
  ['a leading newline', '\nabc'],
  ['only a dot (a path segment clients resolve)', '.'],
  ['only two dots (a path segment clients resolve)', '..'],
];

describe('isValidChatKey', () => {
  it.each(valid)('accepts %j', (key) => {
    expect(isValidChatKey(key)).toBe(true);
    expect(chatKeySchema.safeParse(key).success).toBe(true);
  });

  it.each(invalid)('rejects a key with %s', (_label, key) => {
    expect(isValidChatKey(key)).toBe(false);
    expect(chatKeySchema.safeParse(key).success).toBe(false);
  });

  it('accepts exactly 200 characters and rejects 201', () => {
    expect(isValidChatKey('a'.repeat(200))).toBe(true);
    expect(isValidChatKey('a'.repeat(201))).toBe(false);
  });

  it('gives a stable answer when called repeatedly (the pattern keeps no lastIndex state)', () => {
    expect(CHAT_KEY_PATTERN.global).toBe(false);
    expect(CHAT_KEY_PATTERN.sticky).toBe(false);
    for (let i = 0; i < 3; i++) expect(isValidChatKey('telegram-chat-123')).toBe(true);
  });

  it('explains the allowed alphabet when the schema rejects a key', () => {
    const parsed = chatKeySchema.safeParse('a b');
    expect(parsed.success).toBe(false);
    if (!parsed.success) expect(parsed.error.issues[0]?.message).toContain('[A-Za-z0-9._:@-]');
  });
});

describe('telegramChatKey', () => {
  it('builds telegram-chat-<id> for a chat without a thread', () => {
    expect(telegramChatKey(123)).toBe('telegram-chat-123');
    expect(telegramChatKey('123')).toBe('telegram-chat-123');
  });

  it('appends the forum topic when a thread id is given', () => {
    expect(telegramChatKey(123, 7)).toBe('telegram-chat-123-topic-7');
    expect(telegramChatKey('123', '7')).toBe('telegram-chat-123-topic-7');
  });

  it('treats an empty thread id as no thread', () => {
    expect(telegramChatKey(123, '')).toBe('telegram-chat-123');
    expect(telegramChatKey(123, undefined)).toBe('telegram-chat-123');
  });

  it('keeps thread 0 as a topic rather than dropping it', () => {
    expect(telegramChatKey(123, 0)).toBe('telegram-chat-123-topic-0');
  });

  it('produces valid chat keys, negative group ids included', () => {
    for (const key of [
      telegramChatKey(123),
      telegramChatKey(123, 7),
      telegramChatKey(-1001234567890),
      telegramChatKey(-1001234567890, 42),
    ]) {
      expect(isValidChatKey(key)).toBe(true);
    }
    expect(telegramChatKey(-1001234567890, 42)).toBe('telegram-chat--1001234567890-topic-42');
  });
});

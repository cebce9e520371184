import { describe, expect, it } from 'vitest';
import { type ChatKeys, chatKeys, lazyChatKeys } from '../../src/shared/keys.js';

describe('chat key names', () => {
  it('the names a store builds when read are exactly chatKeys, every one under the chat hash tag', () => {
    const eager = chatKeys('cl', 'telegram:42');
    const lazy = lazyChatKeys('cl', 'telegram:42');
    const names = Object.keys(eager) as Array<keyof ChatKeys>;
    expect(names).toHaveLength(21);
    for (const name of names) {
      expect(lazy[name]).toBe(eager[name]);
      expect(lazy[name]).toBe(`cl:{c:telegram:42}:${name}`);
    }
  });
});

import { createHash } from 'node:crypto';
import { CHAT_KEY_PATTERN } from '../chat-key.js';
import { escapeChatKeyPart, unescapeChatKeyPart } from './chat-key.js';

/**
 * The chatKey of a Chat SDK thread id `<platform>:<rest>` for platforms without a form of
 * their own (Slack, WhatsApp, Discord, Teams, Google Chat): `<platform>-<escaped rest>`.
 * Their ids are mostly in chatlane's alphabet already, so the common keys read like the
 * thread id (`slack-C0123ABC:1700000000.000100`, `whatsapp-1098765432:15551234567`); a `/`
 * (Google Chat's `spaces/…`) or `_` (Teams' base64url) is escaped reversibly.
 *
 * A thread id whose key would be longer than chatlane allows (a Teams conversation id with a
 * long service URL) becomes `<platform>-_h<sha256>`: still deterministic, and `_h` is never
 * produced by the escaping (`_` is always followed by two hex digits there), so the two
 * forms cannot collide. That form cannot be turned back into a thread id: the chat's stored
 * reply route carries the raw thread id, which is what delivery uses.
 */
export function prefixedChatKey(platform: string, threadId: string): string {
  const rest = threadId.startsWith(`${platform}:`) ? threadId.slice(platform.length + 1) : threadId;
  const key = `${platform}-${escapeChatKeyPart(rest)}`;
  if (CHAT_KEY_PATTERN.test(key)) return key;
  return `${platform}-_h${createHash('sha256').update(threadId).digest('hex').slice(0, 40)}`;
}

/** The thread id `prefixedChatKey` was given, or undefined (other platform, hashed form). */
export function prefixedThreadId(platform: string, chatKey: string): string | undefined {
  const head = `${platform}-`;
  if (!chatKey.startsWith(head)) return undefined;
  const rest = unescapeChatKeyPart(chatKey.slice(head.length));
  return rest === undefined || rest === '' ? undefined : `${platform}:${rest}`;
}

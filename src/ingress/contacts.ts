import type { ChatMessage } from '../shared/messages.js';
import { ContactBook } from '../shared/store/contacts.js';
import { WriteThrottle } from './throttle.js';

/** Re-upsert one name in one chat at most this often per ingress process. */
export const CONTACT_TOUCH_MS = 60_000;

/**
 * Keeps the contact book current from ingested messages without a write per message: one
 * name in one chat is upserted at most once a minute per process (so `lastSeen` is good to a
 * minute).
 */
export class ContactTracker {
  private readonly throttle: WriteThrottle;

  constructor(
    private readonly book: ContactBook,
    intervalMs = CONTACT_TOUCH_MS,
  ) {
    this.throttle = new WriteThrottle(intervalMs);
  }

  async touch(chatKey: string, message: ChatMessage, now = Date.now()): Promise<void> {
    const username = message.metadata?.username;
    if (!username) return;
    const key = `${chatKey}\n${username}`;
    if (!this.throttle.due(key, now)) return;
    const contact = ContactBook.fromMessage(chatKey, message, now);
    if (!contact) return;
    await this.book.upsert(contact);
    this.throttle.done(key, now);
  }
}

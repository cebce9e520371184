import type { ChatStore } from '../shared/store/chat-store.js';

/** Re-touch a chat in the activity index at most this often per ingress process. */
export const TOUCH_INTERVAL_MS = 1000;
const MAX_TRACKED = 100_000;

/**
 * Keeps `P:chats` (the sweeper's and listings' index) current without a write on every
 * message: a busy chat is re-touched at most once a second per process. The map only
 * records successful writes, so a failed touch is retried by the next message.
 */
export class ActivityIndex {
  private readonly touched = new Map<string, number>();

  constructor(
    private readonly store: ChatStore,
    private readonly intervalMs = TOUCH_INTERVAL_MS,
  ) {}

  async touch(chatKey: string, now = Date.now()): Promise<void> {
    const last = this.touched.get(chatKey);
    if (last !== undefined && now - last < this.intervalMs) return;
    await this.store.touchChat(chatKey, now);
    // Bounded memory: forgetting only costs one extra write per chat.
    if (this.touched.size >= MAX_TRACKED) this.touched.clear();
    this.touched.set(chatKey, now);
  }
}

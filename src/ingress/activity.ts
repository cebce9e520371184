import type { ChatStore } from '../shared/store/chat-store.js';
import { WriteThrottle } from './throttle.js';

/** Re-touch a chat in the activity index at most this often per ingress process. */
export const TOUCH_INTERVAL_MS = 1000;

/**
 * Keeps `P:chats` (the sweeper's and listings' index) current without a write on every
 * message: a busy chat is re-touched at most once a second per process.
 */
export class ActivityIndex {
  private readonly throttle: WriteThrottle;

  constructor(
    private readonly store: ChatStore,
    intervalMs = TOUCH_INTERVAL_MS,
  ) {
    this.throttle = new WriteThrottle(intervalMs);
  }

  async touch(chatKey: string, now = Date.now()): Promise<void> {
    if (!this.throttle.due(chatKey, now)) return;
    await this.store.touchChat(chatKey, now);
    this.throttle.done(chatKey, now);
  }
}

import type { Logger } from '../logger.js';
import { decodeRoute } from './route.js';
import type { SenderRegistry } from './sender.js';

/** Telegram's typing status lasts about 5 s; Discord's 10 s: renew a little sooner. */
const RENEW_MS = 4000;

/**
 * "The bot is typing" while a turn runs, for chats whose platform can show it. The worker
 * calls `start` once the turn has messages to answer, with the chat's reply route as its
 * lease read it (no extra read), and `stop` when the turn ends; the indicator asks the
 * channel's sender to show typing now and every 4 s until stopped. Best effort: it never throws and never delays the
 * turn (a failed typing call changes nothing about the reply).
 *
 * Keyed by chatKey: a process runs at most one turn of a chat at a time (the chat's lease).
 */
export class TypingIndicator {
  private readonly active = new Map<string, NodeJS.Timeout | undefined>();

  constructor(
    private readonly senders: SenderRegistry,
    private readonly logger: Logger,
    private readonly renewMs = RENEW_MS,
  ) {}

  /** `route`: the chat's stored reply route (meta.route); a chat without one shows nothing. */
  start(chatKey: string, route: string | undefined): void {
    if (route === undefined || this.active.has(chatKey)) return;
    this.active.set(chatKey, undefined);
    try {
      this.begin(chatKey, route);
    } catch (err) {
      this.logger.debug({ err, chatKey }, 'typing indicator failed');
    }
  }

  stop(chatKey: string): void {
    clearTimeout(this.active.get(chatKey));
    this.active.delete(chatKey);
  }

  private begin(chatKey: string, stored: string): void {
    const route = decodeRoute(stored);
    const sender = route ? this.senders.get(route.channel) : undefined;
    const threadId = route?.threadId;
    if (!sender?.typing || !threadId) return;
    const typing = sender.typing.bind(sender);
    const tick = () => {
      if (!this.active.has(chatKey)) return;
      void typing(threadId);
      const timer = setTimeout(tick, this.renewMs);
      timer.unref();
      this.active.set(chatKey, timer);
    };
    tick();
  }
}

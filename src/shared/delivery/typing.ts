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
  private readonly active = new Map<string, NodeJS.Timeout>();

  constructor(
    private readonly senders: SenderRegistry,
    private readonly logger: Logger,
    private readonly renewMs = RENEW_MS,
  ) {}

  /** `route`: the chat's stored reply route (meta.route); a chat without one shows nothing. */
  start(chatKey: string, route: string | undefined): void {
    if (route === undefined || this.active.has(chatKey)) return;
    const decoded = decodeRoute(route);
    const sender = decoded ? this.senders.get(decoded.channel) : undefined;
    const threadId = decoded?.threadId;
    if (!sender?.typing || !threadId) return;
    const typing = sender.typing.bind(sender);
    // A sender should not throw; one that does must not become an unhandled rejection.
    const tick = () =>
      void typing(threadId).catch((err: unknown) =>
        this.logger.debug({ err, chatKey }, 'typing indicator failed'),
      );
    tick();
    this.active.set(chatKey, setInterval(tick, this.renewMs).unref());
  }

  stop(chatKey: string): void {
    clearInterval(this.active.get(chatKey));
    this.active.delete(chatKey);
  }
}

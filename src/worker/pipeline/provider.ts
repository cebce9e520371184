import type { ChatStore } from '../../shared/store/chat-store.js';
import { withTokens } from '../../shared/tokens.js';
import type { Provider, ProviderResult } from './types.js';

/**
 * Loads what a turn needs and no more: the newest history window (plus the summary at the
 * head) and the oldest pending messages, in one round trip.
 */
export class RedisProvider implements Provider {
  constructor(
    private readonly store: ChatStore,
    private readonly opts: { windowMessages: number; maxPendingPerTurn: number },
  ) {}

  async load(chatKey: string): Promise<ProviderResult> {
    const { window, pending } = await this.store.readTurnInput(
      chatKey,
      this.opts.windowMessages,
      this.opts.maxPendingPerTurn,
    );
    const history = window.summary ? [window.summary, ...window.messages] : window.messages;
    return {
      // Committed messages already carry tokens; withTokens only fills legacy gaps.
      history: history.map(withTokens),
      pending: pending.map((e) => ({ streamId: e.streamId, message: withTokens(e.message) })),
      historyTotal: window.total,
    };
  }
}

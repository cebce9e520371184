import type { ChatStore, TurnInput, TurnReads } from '../../shared/store/chat-store.js';
import { withTokens } from '../../shared/tokens.js';
import type { Provider, ProviderResult } from './types.js';

/**
 * Loads what a turn needs and no more: the newest history window (plus the summary at the
 * head) and the oldest pending messages, read with the lease or else in one round trip.
 */
export class RedisProvider implements Provider {
  readonly reads: TurnReads;

  constructor(
    private readonly store: ChatStore,
    private readonly opts: { windowMessages: number; maxPendingPerTurn: number; maxCharsPerMessage: number },
  ) {
    this.reads = { windowMessages: opts.windowMessages, maxPending: opts.maxPendingPerTurn };
  }

  async load(chatKey: string, read?: TurnInput): Promise<ProviderResult> {
    const { window, pending, memory, archived, contexts } =
      read ?? (await this.store.readTurnInput(chatKey, this.reads.windowMessages, this.reads.maxPending));
    const history = window.summary ? [window.summary, ...window.messages] : window.messages;
    const clip = this.opts.maxCharsPerMessage;
    return {
      // Committed messages already carry tokens; withTokens only fills gaps (pending messages,
      // counts made before MAX_CHARS_PER_MESSAGE changed).
      history: await Promise.all(history.map((m) => withTokens(m, clip))),
      pending: await Promise.all(
        pending.map(async (e) => ({ streamId: e.streamId, message: await withTokens(e.message, clip) })),
      ),
      historyTotal: window.total,
      archived,
      contexts,
      memory,
    };
  }
}

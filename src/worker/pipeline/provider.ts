import type { ChatStore, TurnInput, TurnReads } from '../../shared/store/chat-store.js';
import { withTokens } from '../../shared/tokens.js';
import type { Provider, ProviderResult } from './types.js';

/**
 * Where a window of `size` messages over a history of `total` starts (an index into the
 * history): it moves in steps of `step` messages, not one message per turn, so the turns
 * between two steps each start where the one before started, and their requests extend one
 * another (a provider's prompt cache serves the shared prefix). Between `size - step + 1` and
 * `size` messages are in it.
 */
export function windowStart(total: number, size: number, step: number): number {
  const newest = Math.max(0, total - size);
  return Math.ceil(newest / step) * step;
}

/** HISTORY_WINDOW_MESSAGES moves in quarters: the model sees at least 3/4 of it. */
export function windowStep(size: number): number {
  return Math.max(1, Math.floor(size / 4));
}

/**
 * Loads what a turn needs and no more: the newest history window, stepped (`windowStart`), plus
 * the summary at the head, and the oldest pending messages, read with the lease or else in one
 * round trip.
 */
export class RedisProvider implements Provider {
  readonly reads: TurnReads;
  private readonly step: number;

  constructor(
    private readonly store: ChatStore,
    private readonly opts: { windowMessages: number; maxPendingPerTurn: number; maxCharsPerMessage: number },
  ) {
    this.reads = { windowMessages: opts.windowMessages, maxPending: opts.maxPendingPerTurn };
    this.step = windowStep(opts.windowMessages);
  }

  async load(chatKey: string, read?: TurnInput): Promise<ProviderResult> {
    const { window, pending, memory, archived, contexts } =
      read ?? (await this.store.readTurnInput(chatKey, this.reads.windowMessages, this.reads.maxPending));
    // The read holds the newest messages; the ones before the window's step are dropped.
    const from = windowStart(window.total, this.reads.windowMessages, this.step);
    const newest = window.messages.slice(Math.max(0, from - (window.total - window.messages.length)));
    const history = window.summary ? [window.summary, ...newest] : newest;
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

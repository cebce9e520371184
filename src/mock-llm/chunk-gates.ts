/**
 * Step gates for streamed answers, per chat: a held chat's stream stops after each content
 * event until the test lets the next one out. A test that waits for its client to show each
 * piece before letting the next one out sees every piece arrive on its own, however loaded the
 * machine; pieces paced by `chunkMs` alone can arrive together at a busy client and merge.
 */

interface Held {
  /** Content events let out ahead, before a stream got to wait for them. */
  allowed: number;
  /** Streams waiting after a content event, oldest first. */
  waiting: Array<() => void>;
}

export class ChunkGates {
  private readonly held = new Map<string, Held>();

  /** Streamed answers of `chatKey` stop after each content event from now on (`next`, `release`). */
  hold(chatKey: string): void {
    if (!this.held.has(chatKey)) this.held.set(chatKey, { allowed: 0, waiting: [] });
  }

  /**
   * Lets one more content event of `chatKey` out: the stream waiting longest goes on to its
   * next one; with none waiting, the next stream to stop goes on at once.
   */
  next(chatKey: string): void {
    const held = this.held.get(chatKey);
    if (!held) return;
    const go = held.waiting.shift();
    if (go) go();
    else held.allowed += 1;
  }

  /** `chatKey`'s streams go on without stopping. */
  release(chatKey: string): void {
    const held = this.held.get(chatKey);
    if (!held) return;
    this.held.delete(chatKey);
    for (const go of held.waiting) go();
  }

  releaseAll(): void {
    for (const chatKey of [...this.held.keys()]) this.release(chatKey);
  }

  holds(chatKey: string): boolean {
    return this.held.has(chatKey);
  }

  /** Called by a stream of `chatKey` that wrote a content event: resolves when it may go on. */
  passed(chatKey: string, signal: AbortSignal): Promise<void> {
    const held = this.held.get(chatKey);
    if (!held || signal.aborted) return Promise.resolve();
    if (held.allowed > 0) {
      held.allowed -= 1;
      return Promise.resolve();
    }
    return new Promise((resolve) => {
      const go = () => {
        signal.removeEventListener('abort', gone);
        resolve();
      };
      // A stream whose client left must not take a `next` meant for another.
      const gone = () => {
        held.waiting = held.waiting.filter((w) => w !== go);
        resolve();
      };
      held.waiting.push(go);
      signal.addEventListener('abort', gone, { once: true });
    });
  }
}

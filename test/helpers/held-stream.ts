import type { ChunkGates } from '../../src/mock-llm/chunk-gates.js';
import { waitFor } from './redis.js';

/**
 * Lets the held reply of `chatKey` (the mock's chunkGates) out one piece at a time, each once
 * the client shows the text so far (`shown`: the reply text it shows now), until it shows
 * `whole`; then the rest. Pieces paced by time alone merge on a loaded machine: the reply
 * writer and the ingress each batch what arrived.
 */
export async function stepThrough(
  gates: ChunkGates,
  chatKey: string,
  whole: string,
  shown: () => Promise<string>,
): Promise<void> {
  try {
    for (let text = ''; text !== whole; gates.next(chatKey)) {
      const before = text;
      text = await waitFor(
        async () => {
          const now = await shown();
          return now !== '' && now !== before ? now : false;
        },
        { what: `the client to show the piece after ${JSON.stringify(before)}` },
      );
    }
  } finally {
    gates.release(chatKey);
  }
}

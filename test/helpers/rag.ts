import { messageText } from '../../src/shared/messages.js';
import type { RetrievedDocument } from '../../src/shared/retrieved.js';
import { withRetrieved } from '../../src/worker/pipeline/stages.js';
import type { Provider } from '../../src/worker/pipeline/types.js';

/**
 * A retrieval Provider as a program would write one (docs/library-stages.md): it wraps the
 * default, and adds what `search` finds for the person's newest message to that message.
 * `queries` records what it was asked.
 */
export function retrieving(search: (query: string) => RetrievedDocument[] | Promise<RetrievedDocument[]>) {
  const queries: string[] = [];
  const wrap = (defaults: Provider): Provider => ({
    reads: defaults.reads,
    async load(chatKey, read) {
      const input = await defaults.load(chatKey, read);
      const newest = input.pending.at(-1);
      if (!newest) return input;
      const query = messageText(newest.message);
      queries.push(query);
      return withRetrieved(input, await search(query));
    },
  });
  return { wrap, queries };
}

import { type Stages, withRetrieved } from 'chatlane';

/**
 * Retrieval (RAG) as a Provider stage: the shop's policy pages that match the customer's newest
 * message ride on that message, after the history, so the prompt cache keeps everything before
 * them. chatlane counts them in the token budget like the rest of the message.
 */

interface Page {
  source: string;
  text: string;
  words: string[];
}

const PAGES: Page[] = [
  {
    source: 'policies/refunds.md',
    text: 'Refunds: a delivered order can be refunded in full within 30 days of delivery when it arrived damaged. Shipped orders that have not arrived cannot be refunded yet.',
    words: ['refund', 'refunds', 'broken', 'damaged', 'return', 'money'],
  },
  {
    source: 'policies/shipping.md',
    text: 'Shipping: orders ship within two working days and arrive within five. Tracking links are sent by email.',
    words: ['shipping', 'shipped', 'arrive', 'delivery', 'tracking', 'where'],
  },
];

/** The pages sharing a word with `text`, best first, at most two (a stand-in for your vector search). */
export function search(text: string): Array<{ source: string; text: string }> {
  const words = new Set(text.toLowerCase().split(/[^a-z]+/));
  return PAGES.map((page) => ({ page, score: page.words.filter((w) => words.has(w)).length }))
    .filter((hit) => hit.score > 0)
    .sort((a, b) => b.score - a.score)
    .slice(0, 2)
    .map(({ page }) => ({ source: page.source, text: page.text }));
}

export const stages: Stages = {
  // Wraps chatlane's Provider: it loads the chat as usual, then adds what the search found.
  provider: (defaults) => ({
    reads: defaults.reads,
    async load(chatKey, read) {
      const input = await defaults.load(chatKey, read);
      const newest = input.pending.at(-1)?.message;
      const text = (newest?.parts ?? []).map((p) => (p.type === 'text' ? p.text : '')).join(' ');
      return withRetrieved(input, search(text));
    },
  }),
};

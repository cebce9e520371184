import { tool } from 'ai';
import type { ChatlaneToolContext } from 'chatlane';
import { z } from 'zod';
import { findOrder, refund } from './orders.js';

/**
 * The order desk's two tools. chatlane runs them beside its own (chat_send, …) and hands each
 * call the chat it is for in `options.context`: the chat key, the turn's run id, the ids of
 * the messages the turn answers, and `once`.
 */
export const tools = {
  lookup_order: tool({
    description: "Look up one of this customer's orders by its id: item, amount, status.",
    inputSchema: z.object({ orderId: z.string().describe('the order id, e.g. A-1001') }),
    execute: async ({ orderId }, { context }) => {
      const { chatKey } = context as ChatlaneToolContext;
      return findOrder(chatKey, orderId) ?? { error: `no order ${orderId} for this customer` };
    },
  }),

  refund_order: tool({
    description: "Refund one of this customer's orders in full. Say why. A refund is made at most once.",
    inputSchema: z.object({ orderId: z.string(), reason: z.string() }),
    execute: async ({ orderId, reason }, { context }) => {
      const { chatKey, once } = context as ChatlaneToolContext;
      // At most once per chat and key, across retries and crashes: the result is stored with
      // the chat, and a retried turn gets it back instead of refunding a second time.
      return once(`refund:${orderId}`, () => refund(chatKey, orderId, reason));
    },
  }),
};

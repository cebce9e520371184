import { tool } from 'ai';
import { z } from 'zod';
import type { Contact, ContactBook } from '../../../shared/store/contacts.js';
import { toolInput } from './input.js';
import { triggerDelivery } from './outbox.js';
import { sendWrite, turnOf } from './tool-turn.js';

const INPUT = toolInput(
  z.object({
    username: z.string().min(1).max(200),
    text: z.string().min(1).max(8000),
    chatKey: z.string().min(1).max(200).optional(),
  }),
);

/** How the model sees a contact in a candidate list. */
function describe(c: Contact): string {
  const where = [c.channel, c.chatId && `chat ${c.chatId}`].filter(Boolean).join(', ');
  return `${c.username} — chatKey ${c.chatKey}${where ? ` (${where})` : ''}, last seen ${new Date(c.lastSeen).toISOString()}`;
}

function candidates(list: Contact[]): string {
  return list.length === 0
    ? 'none'
    : list
        .slice(0, 10)
        .map((c) => `\n- ${describe(c)}`)
        .join('');
}

/**
 * `chat_contact_send`: the model writes to another person it knows from the contact book, in
 * that person's chat (only with CONTACT_SEND=on: it lets one conversation reach another).
 * The send is part of this turn: recorded in this chat under the turn's fence, then written
 * to the other chat's outbox once (see ContactBook.send) and delivered like any reply, with a
 * `contact.sent` / `contact.received` event on both chats. An unknown or ambiguous username
 * is a tool error that lists the candidates; `chatKey` picks one of several. Built once per
 * process; the turn comes with each call (tool-turn.ts).
 */
export function createContactSendTool(contacts: ContactBook) {
  return tool({
    description:
      'Send a message to another person you know by username, in their own chat (not this one). ' +
      'If several chats match the username, call again with the chatKey of the right one.',
    inputSchema: INPUT,
    execute: async ({ username, text, chatKey }, options) => {
      const turn = turnOf(options);
      const found = (await contacts.lookup(username)).filter((c) => c.chatKey !== turn.chatKey);
      const matches = chatKey ? found.filter((c) => c.chatKey === chatKey) : found;
      if (matches.length === 0) {
        const similar = found.length > 0 ? found : await contacts.search(username, 10);
        throw new Error(
          `no contact '${username}'${chatKey ? ` in chat ${chatKey}` : ''}. Candidates:${candidates(similar.filter((c) => c.chatKey !== turn.chatKey))}`,
        );
      }
      if (matches.length > 1) {
        throw new Error(
          `'${username}' is in ${matches.length} chats; call again with one chatKey:${candidates(matches)}`,
        );
      }
      const to = matches[0]!;
      const dedupe = `${to.chatKey}\n${text}`;
      turn.contactSends ??= new Set();
      const sent = turn.contactSends;
      if (sent.has(dedupe)) return { status: 'duplicate' as const };
      if (sent.size >= turn.maxSendsPerTurn) {
        return {
          status: 'limit' as const,
          message: `at most ${turn.maxSendsPerTurn} contact messages per turn`,
        };
      }
      sent.add(dedupe);
      const mark = turn.store.markWrite(to.chatKey);
      const res = await sendWrite(turn, () =>
        contacts.send({ chatKey: turn.chatKey, fence: turn.fence, runId: turn.runId }, to, text),
      );
      if (!res.ok) {
        sent.delete(dedupe);
        turn.fencedOut('contact send fenced out');
        return { status: 'fenced-out' as const };
      }
      if (res.routed) await triggerDelivery(turn, to.chatKey, {}, mark);
      if (res.relayError !== undefined) {
        turn.logger.warn(
          { err: res.relayError, sendId: res.sendId, to: to.chatKey },
          'contact send recorded but not written to its chat; the sweeper will finish it',
        );
      }
      return {
        status: 'sent' as const,
        to: { username: to.username, chatKey: to.chatKey, channel: to.channel ?? null },
        // Without a reply route the message waits in that chat's outbox, readable over the API;
        // one whose relay failed is finished by the sweeper.
        delivered:
          res.relayError !== undefined
            ? ('pending' as const)
            : res.routed
              ? ('queued' as const)
              : ('outbox-only' as const),
      };
    },
  });
}

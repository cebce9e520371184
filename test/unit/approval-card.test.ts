import { describe, expect, it } from 'vitest';
import { replyBody } from '../../src/shared/delivery/generic-sender.js';
import { approvalCard } from '../../src/shared/platforms/approval-card.js';
import {
  actionValue,
  approvalText,
  parseActionValue,
  yesOrNo,
} from '../../src/shared/platforms/approval-text.js';

const approval = {
  id: 'aitxt-abcdefghijklmnopqrstuvwx',
  tool: 'exec_shell',
  input: { command: 'ls -la' },
  expiresAt: 1,
};

describe('an approval request on a chat platform', () => {
  it('reads as what would run and how to answer in text', () => {
    expect(approvalText(approval)).toBe(
      'Approve exec_shell?\n```\n$ ls -la\n```\nReply yes to approve or no to deny.',
    );
    expect(approvalText({ tool: 'lookup', input: { id: 7 }, reason: 'costs money' })).toBe(
      'Approve lookup?\n```\n{"id":7}\n```\ncosts money\nReply yes to approve or no to deny.',
    );
  });

  it('is a card with Approve and Deny buttons carrying the approval id (and the chat, off Telegram), its text the fallback', () => {
    const { card, fallbackText } = approvalCard(approval, 'the text', 'slack-C1:1.2', 'slack');
    expect(fallbackText).toBe('the text');
    const actions = card.children.find((c) => c.type === 'actions') as {
      children: Array<{ id: string; value: string }>;
    };
    expect(actions.children.map((b) => [b.id, b.value])).toEqual([
      ['cl.approve', `${approval.id} slack-C1:1.2`],
      ['cl.deny', `${approval.id} slack-C1:1.2`],
    ]);
    // Telegram's callback data (64 bytes) holds the action and the id, nothing more.
    const telegram = `chat:${JSON.stringify({ a: 'cl.approve', v: actionValue(approval.id, 'telegram-chat-1', 'telegram') })}`;
    expect(Buffer.byteLength(telegram)).toBeLessThanOrEqual(64);
    expect(parseActionValue(`${approval.id} slack-C1:1.2`)).toEqual({
      approvalId: approval.id,
      chatKey: 'slack-C1:1.2',
    });
    expect(parseActionValue(approval.id)).toEqual({ approvalId: approval.id });
    expect(parseActionValue('a b c')).toBeUndefined();
    expect(parseActionValue(undefined)).toBeUndefined();
  });

  it('is answered in text by a plain yes or no, nothing else', () => {
    for (const yes of ['yes', 'Yes', ' y ', 'OK', 'approve', 'Yes!']) expect(yesOrNo(yes)).toBe(true);
    for (const no of ['no', 'N', 'deny', 'No.']) expect(yesOrNo(no)).toBe(false);
    for (const other of ['yes please', 'not now', '', 'nope?']) expect(yesOrNo(other)).toBeUndefined();
  });

  it('reaches a generic webhook receiver as approval.requested, with the request', () => {
    const body = JSON.parse(
      replyBody('ticket-1', { id: '1-0', text: 'Approve exec_shell?', ts: 5, runId: 'r', approval }).body,
    );
    expect(body).toMatchObject({
      type: 'approval.requested',
      chatKey: 'ticket-1',
      approval,
      text: 'Approve exec_shell?',
    });
    expect(JSON.parse(replyBody('ticket-1', { id: '1-0', text: 'hi', ts: 5, runId: 'r' }).body).type).toBe(
      'chat.reply',
    );
  });
});

import { Actions, Button, Card, type CardElement, CardText, type PostableCard } from 'chat';
import type { OutboxApproval } from '../store/records.js';
import { APPROVE_ACTION, actionValue, DENY_ACTION, shownInput } from './approval-text.js';

/**
 * A tool approval request as a Chat SDK card (docs/approvals.md, "Chat platforms"): Approve
 * and Deny buttons (a Slack message with buttons, a Telegram inline keyboard, Discord
 * components, Teams and Google Chat cards; text where an adapter has no cards). Delivery posts
 * it; the ingress takes the click (`chat.onAction`; approval-text.ts names the buttons).
 */

/** The card for an approval item; `text` (the request in words, with the yes/no hint) is its fallback. */
export function approvalCard(
  approval: OutboxApproval,
  text: string,
  chatKey: string,
  channel: string,
): PostableCard {
  const value = actionValue(approval.id, chatKey, channel);
  const card: CardElement = Card({
    title: `Approve ${approval.tool}?`,
    children: [
      CardText(shownInput(approval)),
      ...(approval.reason ? [CardText(approval.reason)] : []),
      Actions([
        Button({ id: APPROVE_ACTION, label: 'Approve', style: 'primary', value }),
        Button({ id: DENY_ACTION, label: 'Deny', style: 'danger', value }),
      ]),
      CardText('Or reply yes or no.'),
    ],
  });
  return { card, fallbackText: text };
}

import { AsyncLocalStorage } from 'node:async_hooks';
import type { extractCard } from '@chat-adapter/shared';
import { TelegramAdapter, type TelegramMessage } from '@chat-adapter/telegram';
import type { AdapterPostableMessage, RawMessage } from 'chat';
import { classicPart, isRichPart, TelegramRichRefusedError } from './telegram-messages.js';

type Card = ReturnType<typeof extractCard>;
type ParseMode = 'MarkdownV2' | 'plain';

/** Set while a rich part of a chatlane reply is being posted (the fallback hook has no message). */
const postingRichPart = new AsyncLocalStorage<true>();

/**
 * `@chat-adapter/telegram` as chatlane's reply formats need it (./telegram-messages.ts):
 * a classic part goes with `parse_mode: MarkdownV2` though it is handed over as `{ raw }` (the
 * text is already MarkdownV2: the adapter's own conversion and its cut at 4,096 stay out), and
 * a rich part the Bot API refuses is not sent again by the adapter as cut-down MarkdownV2 but
 * comes back as `TelegramRichRefusedError`. Everything else is the adapter's.
 */
export class ChatlaneTelegramAdapter extends TelegramAdapter {
  /** False once the Bot API refused a rich message as unsupported (the adapter remembers it). */
  get richMessages(): boolean {
    return (this as unknown as { richMessagesAvailable?: boolean }).richMessagesAvailable !== false;
  }

  override postMessage(
    threadId: string,
    message: AdapterPostableMessage,
    replyToMessageId?: string,
  ): Promise<RawMessage<TelegramMessage>> {
    const post = () => super.postMessage(threadId, message, replyToMessageId);
    return isRichPart(message) ? postingRichPart.run(true, post) : post();
  }

  protected override resolveParseMode(message: AdapterPostableMessage, card: Card): ParseMode {
    return classicPart(message) ? 'MarkdownV2' : super.resolveParseMode(message, card);
  }

  protected override renderPlainTextMessage(message: AdapterPostableMessage, card: Card): string {
    return classicPart(message)?.plain ?? super.renderPlainTextMessage(message, card);
  }

  protected override withTelegramRichFallback<T>(
    operation: () => Promise<T>,
    fallback: () => Promise<T>,
    context: { method: string; messageId?: string; threadId?: string },
  ): Promise<T> {
    if (context.method !== 'sendRichMessage' || !postingRichPart.getStore()) {
      return super.withTelegramRichFallback(operation, fallback, context);
    }
    return super.withTelegramRichFallback(
      operation,
      () => Promise.reject(new TelegramRichRefusedError()),
      context,
    );
  }
}

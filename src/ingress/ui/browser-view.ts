import type { MessageFailureCode } from '../../shared/errors.js';
import type { ChatMessage } from '../../shared/messages.js';
import type { ChatEvent } from '../../shared/store/chat-store.js';

/**
 * What a browser token reads of a failure (docs/security.md, "Failure details"): the code and
 * a sentence a person can be shown. The detail — a worker's DNS, connect and TLS errors, the
 * host names and addresses a file URL resolved to — would let anyone holding a browser token
 * map the internal network through file parts; it stays for the API token and the logs.
 */
const FAILURE_TEXT: Record<MessageFailureCode, string> = {
  CONTEXT_OVERFLOW: 'the message is too long for the model',
  CONTENT_REJECTED: 'the model refused the message',
  FILE_REFUSED: 'a file of the message could not be fetched',
  INVALID_MESSAGE: 'the message could not be read',
  TURN_FAILED: 'the message could not be processed',
};

const EVENT_TEXT: Record<string, string> = {
  model_unavailable: 'the model is unavailable; the message waits for it',
  retry: 'the turn failed and will be retried',
  permanent: 'the reply could not be delivered',
  'attempts-exhausted': 'the reply could not be delivered',
};

const GENERIC = 'the message could not be processed';

const textOf = (code: unknown): string =>
  (typeof code === 'string' && (FAILURE_TEXT[code as MessageFailureCode] ?? EVENT_TEXT[code])) || GENERIC;

/** A stored message as a browser token reads it: `metadata.failure.detail` is the generic text. */
export function browserMessage(message: ChatMessage): ChatMessage {
  const failure = message.metadata.failure;
  if (!failure) return message;
  return {
    ...message,
    metadata: { ...message.metadata, failure: { code: failure.code, detail: textOf(failure.code) } },
  };
}

/** A chat event as a browser token reads it: an `error` (turn.failed, delivery.failed) is the generic text. */
export function browserEvent(event: ChatEvent): ChatEvent {
  if (!('error' in event.data)) return event;
  return { ...event, data: { ...event.data, error: textOf(event.data.reason) } };
}

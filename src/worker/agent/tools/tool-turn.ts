import type { Logger } from '../../../shared/logger.js';
import type { ChatMessage } from '../../../shared/messages.js';
import type { ChatStore } from '../../../shared/store/chat-store.js';
import type { ReplyTail, ReplyWriteResult } from '../../../shared/store/reply-streams.js';
import type { ChatWorkspace } from '../../shell/workspace.js';
import type { DeliveryTrigger } from './outbox.js';

/**
 * The part of the turn's reply writer (turn/stream/reply-writer.ts) a send uses: what waits unwritten
 * goes into the send's own outbox write, and the write's result comes back.
 */
export interface ReplyHandOff {
  handOff(): ReplyTail | undefined;
  handedOff(result: ReplyWriteResult | 'failed'): void;
}

/**
 * What chatlane's tools need of the turn calling them. The tools are built once per process
 * (chat-tools.ts); each turn hands this to `generateText` in `toolsContext` under each of
 * their names, and the SDK passes it to their `execute` as `context`. One object per turn instead of seven tools, each with
 * its own closures and description strings, per turn in flight.
 */
export interface ToolTurn {
  store: ChatStore;
  chatKey: string;
  fence: string;
  runId: string;
  logger: Logger;
  /** CHAT_SEND_MAX_PER_TURN: caps chat_send and chat_contact_send each. */
  maxSendsPerTurn: number;
  /** Triggers a chat's delivery after an outbox write, when it has a reply route. */
  deliver?: DeliveryTrigger | undefined;
  /** Shared across attempts of one turn, so a retried attempt never repeats a reply. */
  sends: ChatSendState;
  /** Set on the first chat_contact_send: target chat + text of every contact send of this turn. */
  contactSends?: Set<string>;
  /**
   * The last inbox stream id given to the model: recorded with each send until the commit,
   * so a turn taking over after a crash knows which messages this reply followed.
   */
  seen: () => string;
  /**
   * A chat_send's outbox write also looked at the inbox: `arrived` says whether a message had
   * come after `seen()` by then. Nothing had: the next step need not read the inbox again.
   */
  inboxChecked?: (arrived: boolean) => void;
  /**
   * The turn's live reply (reply streams on): a chat_send's outbox write takes what waits
   * unwritten there, its own text part, into the same script.
   */
  reply?: ReplyHandOff | undefined;
  /** Told when a fenced write is refused (another turn holds the chat): the turn must stop. */
  fencedOut: (reason: string) => void;
  /** Told when a send's write failed, its outcome unknown: the turn ends with `err` (Lane.failWrite). */
  writeFailed: (err: Error) => void;
  /**
   * Before a send: throws (REDIS_REPLICA_ACKS) when the chat's connection changed since the
   * turn took its lease — its earlier sends may be gone with a failed primary, and a send
   * now would be placed after a message whose answer was lost (ChatStore.assertSameConnection).
   */
  checkConnection: () => void;
  /** Continue this turn from `context` (plus the turn's own user messages) from the next step on. */
  rebase: (context: ChatMessage[]) => Promise<void>;
  /** EXEC_SHELL=on: the chat's workspace as this turn sees it (restored on its first command). */
  workspace?: ChatWorkspace | undefined;
}

export interface ChatSendState {
  sent: string[];
  /** Texts earlier runs of this chat sent and never committed (the person has seen them). */
  earlier?: string[];
}

// Only objects made by toolTurn pass turnOf: a stray context is a wiring bug, not a guess.
const issued = new WeakSet<object>();

export function toolTurn(turn: ToolTurn): ToolTurn {
  issued.add(turn);
  return turn;
}

function isToolTurn(value: unknown): value is ToolTurn {
  return typeof value === 'object' && value !== null && issued.has(value);
}

/** The calling turn, from an `execute`'s options. Throws when the loop did not pass one. */
export function turnOf(options: { context?: unknown }): ToolTurn {
  const turn = options.context;
  if (!isToolTurn(turn)) throw new Error('chatlane tool called without its turn (toolsContext)');
  return turn;
}

/**
 * A send tool's write (chat_send, chat_contact_send): refused before it starts when the
 * chat's connection changed (`checkConnection`). A failure, its outcome unknown, ends the
 * turn (`writeFailed`) rather than reaching the model as a tool error, after which the turn
 * would commit as if nothing had been sent; `onFailure` runs first.
 */
export async function sendWrite<T>(
  turn: ToolTurn,
  write: () => Promise<T>,
  onFailure?: () => void,
): Promise<T> {
  try {
    turn.checkConnection();
    return await write();
  } catch (err) {
    onFailure?.();
    turn.writeFailed(err instanceof Error ? err : new Error(String(err)));
    throw err;
  }
}

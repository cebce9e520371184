import { jsonSchema, type Schema } from 'ai';
import type { Logger } from '../../../shared/logger.js';
import type { OnceFunction } from './once.js';

/**
 * The context a tool given in code gets, as a type and a schema a program declares: apart from
 * custom-tools.ts, so the package entry exports them without loading what runs the tools.
 */

/**
 * What a tool given in code finds in `options.context` (AI SDK 7 tool context): the chat and
 * the turn calling it. Declare `contextSchema: chatlaneToolContextSchema` to have it typed.
 */
export type ChatlaneToolContext = {
  /** The chat this turn answers. */
  readonly chatKey: string;
  /** This turn's run: a retried turn has another, so never make it part of a `once` key. */
  readonly runId: string;
  /** The user messages the turn answers, oldest first: those it started with and those merged into it so far. */
  readonly messageIds: readonly string[];
  /** Where the newest of those messages came from (`telegram`, `api`, ...), when known. */
  readonly channel: string | undefined;
  /** Who sent the newest of those messages, when known. */
  readonly userId: string | undefined;
  readonly username: string | undefined;
  /** The turn's logger (pino), bound to chatKey and runId. */
  readonly logger: Logger;
  /**
   * Runs `fn` at most once per chat and key once its result is stored: a retried or
   * taken-over turn, or a later call, gets the stored result instead. A fn that did not store
   * its result (its worker died while it ran, it threw) runs again, told `attempt` > 1.
   * Name the effect in the key (`refund:<orderId>`), never the run.
   */
  readonly once: OnceFunction;
};

/** The keys a chat's context has: a `contextSchema` requiring any other can never be satisfied. */
export const CONTEXT_KEYS: ReadonlyArray<keyof ChatlaneToolContext> = [
  'chatKey',
  'runId',
  'messageIds',
  'channel',
  'userId',
  'username',
  'logger',
  'once',
];

// Only contexts made by toolContext pass chatlaneToolContextSchema.
const issued = new WeakSet<object>();

/** Marks a context toolContext made (custom-tools.ts): only those pass chatlaneToolContextSchema. */
export function issue(context: ChatlaneToolContext): void {
  issued.add(context);
}

/** Whether toolContext made `context`. */
export function wasIssued(context: object): boolean {
  return issued.has(context);
}

/**
 * A `contextSchema` for a tool given in code: `options.context` is then typed as
 * `ChatlaneToolContext`, and a call without chatlane's context is refused.
 */
export const chatlaneToolContextSchema: Schema<ChatlaneToolContext> = jsonSchema<ChatlaneToolContext>(
  {
    type: 'object',
    properties: {
      chatKey: { type: 'string' },
      runId: { type: 'string' },
      messageIds: { type: 'array', items: { type: 'string' } },
      channel: { type: 'string' },
      userId: { type: 'string' },
      username: { type: 'string' },
      logger: {},
      once: {},
    },
    required: ['chatKey', 'runId', 'messageIds', 'logger', 'once'],
  },
  {
    validate: (value) =>
      typeof value === 'object' && value !== null && issued.has(value)
        ? { success: true, value: value as ChatlaneToolContext }
        : { success: false, error: new Error("not chatlane's tool context") },
  },
);

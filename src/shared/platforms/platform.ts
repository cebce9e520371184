import type { Adapter, Message } from 'chat';
import type { PlatformReplies } from '../delivery/render/format.js';
import type { Logger } from '../logger.js';
import type { MessageMetadata } from '../messages.js';

/**
 * THE CONTRACT OF A PLATFORM MODULE (one file per platform: src/shared/platforms/<name>.ts,
 * listed in `PLATFORMS` in ./registry.ts). Everything platform-specific lives in that one
 * module; the webhook route, the polling lease, the Chat instance, the ingest handler and the
 * delivery sender are shared and never switch on the platform name.
 *
 * 1. `name`: lower-case, [a-z0-9-]. It is the Chat SDK adapter key, the webhook path segment
 *    (`POST /webhooks/<name>`), `route.channel` of the chats it opens, the `channel` metadata
 *    of their messages and the label of its metrics.
 * 2. `fromEnv(env)`: reads only the variables it owns (the adapter's own names, e.g.
 *    TELEGRAM_BOT_TOKEN) out of the map config.ts hands it (process.env is never read
 *    elsewhere). Returns `{ enabled: false }` when none of them is set, `{ enabled: true,
 *    settings }` when the platform is fully configured, `{ problems }` when it is half there:
 *    each problem names the variable (`'TELEGRAM_WEBHOOK_SECRET_TOKEN: missing: ...'`). Any
 *    problem stops the process at boot. It must not throw and must not do I/O. Every
 *    variable it reads is in `variables`, with its meaning: `chatlane config` and
 *    docs/configuration.md list them, and a test fails on a variable read but not listed.
 * 3. `describe(settings)`: what the start-up log says about it (never a secret).
 * 4. `createAdapter(settings, logger)`: the Chat SDK adapter with every option passed
 *    explicitly (the adapter's own env auto-detection is a second reader of the environment;
 *    passing the value makes it unused). Import the adapter package dynamically inside it, so
 *    a process that does not enable the platform never loads its SDK. The adapter must never
 *    start polling by itself on `initialize()` (delivery processes build one too): polling
 *    is started by the shared poller only (point 11).
 * 5. `chatKey(threadId)` / `threadIdOf(chatKey)`: the deterministic, documented mapping from
 *    the adapter's raw thread id to a chatKey and back (`threadIdOf(chatKey(t)) === t` for every
 *    thread id the adapter produces). Use `escapeChatKeyPart` from ./chat-key.ts for any
 *    platform id that may carry characters outside chatlane's chatKey set: escape, never
 *    reject. Keep it below 200 characters.
 * 6. `metadata(message, threadId)`: the platform facts stored on the user UIMessage (chatId,
 *    threadId, userId, username, messageId = the platform's message id, chatType). `channel`
 *    is set by the shared handler.
 * 7. `isGroup(message, threadId)` and optionally `isMention(message)`: with GROUP_MODE=mentions
 *    (default) a group message is ingested only when it mentions the bot. The default mention
 *    rule is the Chat SDK's `message.isMention` (the adapter's own detection plus @userName);
 *    override only when the platform has a better idea of a mention.
 * 8. `notes(message)`: optional text lines describing attachments that cannot be stored as
 *    file parts. Ingest accepts only https:/data: file URLs, so a platform file that is an id
 *    (Telegram file_id) or a private URL becomes a short text note plus metadata, never bytes.
 *    Attachments with a public https URL become `file` parts through the shared handler.
 * 9. `unsupported(message)`: optional; a reason string when a parsed message must not be
 *    ingested (e.g. an edit). Updates the adapter never turns into a message (reactions,
 *    joins, ...) are counted as unsupported by the shared route without asking the module.
 * 10. `typing`: true when `adapter.startTyping(threadId)` shows the bot as typing; the
 *    delivery side then calls it while a turn of such a chat runs.
 * 11. Polling (optional): `polling(settings)` returns true when the platform should pull
 *    updates itself instead of receiving webhooks; its webhook route then answers 404, and
 *    the shared poller runs `adapter.startPolling()` under a fleet-wide Redis lease (one
 *    poller at a time) and `adapter.stopPolling()` when the lease is lost. The module's
 *    adapter must expose both.
 * 12. `verifiesWithGet` (optional): true when the platform checks the endpoint with a GET
 *    before it sends anything (Meta's WhatsApp `hub.challenge` handshake): `GET
 *    /webhooks/<name>` is then handed to the adapter too; other platforms answer it 404.
 *
 * 13. `replies()`: how a reply becomes this platform's messages: its format(s) from
 *    src/shared/delivery/render/ (the one place that renders and splits replies), imported
 *    dynamically like the adapter. Delivery posts each part as the format hands it over.
 *
 * Errors from `adapter.postMessage` are classified by the shared sender through the Chat SDK's
 * error classes (`AdapterRateLimitError.retryAfter`, `PermissionError`, ...): a module needs
 * no code for delivery unless its adapter throws something else.
 */
export interface PlatformModule<S = unknown> {
  readonly name: string;
  /** Every variable `fromEnv` reads (point 2); setting any of them turns the platform on. */
  readonly variables: readonly PlatformVariable[];
  fromEnv(env: Readonly<Record<string, string>>): PlatformEnvResult<S>;
  describe(settings: S): Record<string, unknown>;
  createAdapter(settings: S, logger: Logger): Promise<Adapter>;
  chatKey(threadId: string): string;
  threadIdOf(chatKey: string): string | undefined;
  metadata(message: Message, threadId: string): PlatformMessageFacts;
  isGroup(message: Message, threadId: string): boolean;
  isMention?(message: Message): boolean;
  notes?(message: Message): string[];
  unsupported?(message: Message): string | undefined;
  readonly typing: boolean;
  polling?(settings: S): boolean;
  readonly verifiesWithGet?: boolean;
  replies(): Promise<PlatformReplies>;
}

/** One variable of a platform module, as the configuration reference lists it. */
export interface PlatformVariable {
  readonly name: string;
  /** true: needed once the platform is on; a string says when it is (e.g. 'in webhook mode'). */
  readonly required?: true | string;
  /** What unset means, when it is not simply "not set". */
  readonly default?: string;
  /** What to set it to, in a line; for a required one also the end of its "missing: …; set …" problem. */
  readonly meaning: string;
}

export type PlatformEnvResult<S> =
  | { enabled: false }
  | { enabled: true; settings: S }
  | { enabled: true; problems: string[] };

/** Platform facts kept on the user message (DESIGN: "metadata on the user UIMessage"). */
export interface PlatformMessageFacts {
  chatId: string;
  threadId: string;
  userId?: string;
  username?: string;
  messageId: string;
  chatType: string;
  /** Anything else worth keeping, short strings (e.g. file ids). */
  extra?: Record<string, unknown>;
}

/** A platform turned on by the environment: its module and its parsed settings. */
export interface EnabledPlatform<S = unknown> {
  module: PlatformModule<S>;
  settings: S;
}

/** How group messages are picked (GROUP_MODE). */
export type GroupMode = 'all' | 'mentions';

export type PlatformMetadata = Pick<
  MessageMetadata,
  'channel' | 'chatId' | 'threadId' | 'userId' | 'username' | 'messageId'
>;

import { createServer, type IncomingMessage, type Server, type ServerResponse } from 'node:http';
import { parseMarkdownV2 } from './markdown-v2.js';

/**
 * A local fake of the Telegram Bot API (tests and `chatlane demo`; never used in production)
 * (`POST /bot<token>/<method>`), reached by the real `@chat-adapter/telegram` through
 * TELEGRAM_API_BASE_URL. It answers what chatlane's use of the adapter calls, as Bot API 10.1
 * has it: getMe, sendRichMessage and sendMessage (recorded in `sent`), editMessageText (text or
 * rich_message; recorded in `edits`; `textNow` is a message's text after its edits), the private-chat
 * drafts sendMessageDraft and sendRichMessageDraft (recorded in `drafts`), deleteMessage
 * (recorded in `deleted`; `textNow` is then undefined), answerCallbackQuery (recorded in
 * `answeredCallbacks`; a sent or edited message's `reply_markup` is kept), sendChatAction
 * (recorded), getUpdates (long polling over `pushUpdate`), deleteWebhook, setWebhook,
 * getWebhookInfo. `new FakeTelegram({ richMessages: false })` is a server older than 10.1: no
 * sendRichMessage / sendRichMessageDraft (404), so the adapter falls back to sendMessage and
 * sendMessageDraft. Errors come in Telegram's own shape (`{ ok: false, error_code,
 * description, parameters: { retry_after } }`), scripted per chat with `failNext`. Like the
 * Bot API, sendMessage and editMessageText refuse MarkdownV2 Telegram cannot parse ("can't
 * parse entities", ./markdown-v2.ts) and text past 4,096 characters after parsing, and
 * sendRichMessage Markdown past 32,768 ("message is too long").
 */
export const TEXT_LIMIT = 4096;
export const RICH_LIMIT = 32_768;
export const BOT = { id: 7000001, username: 'chatlane_test_bot', token: '7000001:TEST-token_abc' };

export interface SentMessage {
  method: string;
  chatId: string;
  threadId: number | undefined;
  /** As sent: MarkdownV2 source with `parseMode` MarkdownV2, a rich message's Markdown. */
  text: string;
  parseMode?: string;
  at: number;
  /** Telegram's message_id (for edits; unset on refused calls and drafts). */
  messageId?: number;
  /** The call's reply_markup (an inline keyboard), when it had one. */
  replyMarkup?: unknown;
}

export interface SentDraft extends SentMessage {
  draftId: number;
}

export interface ScriptedError {
  code: number;
  description: string;
  retryAfter?: number;
  /** Only calls of these methods fail (default: every send, edit and draft to the chat). */
  methods?: string[];
}

export interface FakeTelegramOptions {
  /** Bot API 10.1's rich messages (sendRichMessage, sendRichMessageDraft); default true. */
  richMessages?: boolean;
}

export class FakeTelegram {
  readonly sent: SentMessage[] = [];
  /** Accepted editMessageText calls, oldest first (the text each one set). */
  readonly edits: SentMessage[] = [];
  /** Accepted draft updates, oldest first. */
  readonly drafts: SentDraft[] = [];
  /** Accepted deleteMessage calls, oldest first. */
  readonly deleted: SentMessage[] = [];
  /** answerCallbackQuery calls (a button press acknowledged), oldest first. */
  readonly answeredCallbacks: string[] = [];
  readonly typing: Array<{ chatId: string; threadId: number | undefined }> = [];
  readonly refused: Array<SentMessage & { code: number }> = [];
  /**
   * Runs on the next accepted send (already recorded in `sent`) instead of answering it, with
   * the answer to send when it wants to: a test can freeze or kill the sender in that window.
   */
  onNextAccept: ((answer: () => Promise<void>, res: ServerResponse) => Promise<void>) | undefined;
  /** getUpdates calls answered (by any process). */
  getUpdatesCalls = 0;
  /** getUpdates requests open at once, now and at most (one poller at a time keeps it at 1). */
  inFlight = 0;
  maxInFlight = 0;
  /** How often each update_id was handed out by getUpdates. */
  readonly served = new Map<number, number>();
  private readonly failures = new Map<string, ScriptedError[]>();
  private readonly updates: Array<{ update_id: number } & Record<string, unknown>> = [];
  private waiting: Array<() => void> = [];
  private server!: Server;
  private readonly richMessages: boolean;
  /** The text each sent message shows now (message_id -> text), edits applied. */
  private readonly current = new Map<number, string>();
  url = '';

  constructor(options: FakeTelegramOptions = {}) {
    this.richMessages = options.richMessages ?? true;
  }

  async start(): Promise<this> {
    this.server = createServer((req, res) => void this.handle(req, res));
    await new Promise<void>((r) => this.server.listen(0, '127.0.0.1', r));
    this.url = `http://127.0.0.1:${(this.server.address() as { port: number }).port}`;
    return this;
  }

  /**
   * The next send to `chatId` (and `times - 1` after it) fails with `error`; an error with
   * `methods` waits for a call of one of them.
   */
  failNext(chatId: string | number, error: ScriptedError, times = 1): void {
    const list = this.failures.get(String(chatId)) ?? [];
    for (let i = 0; i < times; i++) list.push(error);
    this.failures.set(String(chatId), list);
  }

  /** Queues an update for getUpdates. */
  pushUpdate(update: { update_id: number } & Record<string, unknown>): void {
    this.updates.push(update);
    for (const wake of this.waiting.splice(0)) wake();
  }

  sentTo(chatId: string | number): SentMessage[] {
    return this.sent.filter((s) => s.chatId === String(chatId));
  }

  /** What the message with this message_id shows now (after its edits). */
  textNow(messageId: number | undefined): string | undefined {
    return messageId === undefined ? undefined : this.current.get(messageId);
  }

  editsTo(chatId: string | number): SentMessage[] {
    return this.edits.filter((s) => s.chatId === String(chatId));
  }

  draftsTo(chatId: string | number): SentDraft[] {
    return this.drafts.filter((s) => s.chatId === String(chatId));
  }

  close(): Promise<void> {
    for (const wake of this.waiting.splice(0)) wake();
    this.server.closeAllConnections();
    return new Promise((r) => this.server.close(() => r()));
  }

  private async handle(req: IncomingMessage, res: ServerResponse): Promise<void> {
    const chunks: Buffer[] = [];
    for await (const c of req) chunks.push(c as Buffer);
    const text = Buffer.concat(chunks).toString('utf8');
    const m = /^\/bot([^/]+)\/(\w+)$/.exec(req.url ?? '');
    const reply = (status: number, body: unknown) => {
      res.writeHead(status, { 'content-type': 'application/json' }).end(JSON.stringify(body));
    };
    if (!m || m[1] !== BOT.token) {
      reply(401, { ok: false, error_code: 401, description: 'Unauthorized' });
      return;
    }
    const params = (text ? JSON.parse(text) : {}) as Record<string, unknown>;
    const ok = (result: unknown) => reply(200, { ok: true, result });
    switch (m[2]) {
      case 'getMe':
        return ok({ id: BOT.id, is_bot: true, first_name: 'Test Bot', username: BOT.username });
      case 'deleteWebhook':
      case 'setWebhook':
        return ok(true);
      case 'getWebhookInfo':
        return ok({ url: '', pending_update_count: 0 });
      case 'sendChatAction':
        this.typing.push({
          chatId: String(params.chat_id),
          threadId: params.message_thread_id as number | undefined,
        });
        return ok(true);
      case 'sendMessage':
        return this.send(m[2], params, reply, res);
      case 'sendRichMessage':
        if (!this.richMessages) break;
        return this.send(m[2], params, reply, res);
      case 'editMessageText':
        return this.edit(params, reply);
      case 'answerCallbackQuery':
        this.answeredCallbacks.push(String(params.callback_query_id));
        return ok(true);
      case 'deleteMessage':
        return this.delete(params, reply);
      case 'sendMessageDraft':
        return this.draft(m[2], params, reply);
      case 'sendRichMessageDraft':
        if (!this.richMessages) break;
        return this.draft(m[2], params, reply);
      case 'getUpdates': {
        this.inFlight += 1;
        this.maxInFlight = Math.max(this.maxInFlight, this.inFlight);
        let open = true;
        const done = () => {
          if (open) this.inFlight -= 1;
          open = false;
        };
        res.once('close', done);
        return this.getUpdates(params, ok, () => !open);
      }
      default:
        break;
    }
    reply(404, { ok: false, error_code: 404, description: 'Not Found: method not found' });
  }

  /** The text a call carries: `text`, or a rich message's markdown (or html). */
  private static textOf(params: Record<string, unknown>): string | undefined {
    const rich = params.rich_message as { markdown?: unknown; html?: unknown } | undefined;
    const text = params.text ?? rich?.markdown ?? rich?.html;
    return typeof text === 'string' ? text : undefined;
  }

  /** The scripted failure for this call, answered; true when there was one. */
  private failed(message: SentMessage, reply: (status: number, body: unknown) => void): boolean {
    const list = this.failures.get(message.chatId);
    const at = list?.findIndex((f) => !f.methods || f.methods.includes(message.method)) ?? -1;
    if (!list || at < 0) return false;
    const [failure] = list.splice(at, 1) as [ScriptedError];
    this.refused.push({ ...message, code: failure.code });
    reply(failure.code, {
      ok: false,
      error_code: failure.code,
      description: failure.description,
      ...(failure.retryAfter !== undefined && { parameters: { retry_after: failure.retryAfter } }),
    });
    return true;
  }

  /** What the Bot API refuses in a text it would show: unparsable MarkdownV2, or too long. */
  private static refusal(message: SentMessage, rich: boolean): string | undefined {
    if (rich) {
      return Array.from(message.text).length > RICH_LIMIT ? 'message is too long' : undefined;
    }
    let shown = message.text;
    if (message.parseMode === 'MarkdownV2') {
      const parsed = parseMarkdownV2(message.text);
      if (!parsed.ok) return parsed.error;
      shown = parsed.text;
    }
    return shown.length > TEXT_LIMIT ? 'message is too long' : undefined;
  }

  private badRequest(reply: (status: number, body: unknown) => void, what: string): void {
    reply(400, { ok: false, error_code: 400, description: `Bad Request: ${what}` });
  }

  private messageResult(message: SentMessage): Record<string, unknown> {
    const { chatId, threadId } = message;
    return {
      message_id: message.messageId,
      date: Math.floor(message.at / 1000),
      chat: { id: Number(chatId), type: chatId.startsWith('-') ? 'supergroup' : 'private' },
      ...(threadId !== undefined && { message_thread_id: threadId, is_topic_message: true }),
      from: { id: BOT.id, is_bot: true, first_name: 'Test Bot', username: BOT.username },
      text: message.text,
    };
  }

  /** editMessageText: a message this bot sent to the chat gets a new text (a Message back). */
  private edit(params: Record<string, unknown>, reply: (status: number, body: unknown) => void): void {
    const chatId = String(params.chat_id);
    const text = FakeTelegram.textOf(params);
    const target = this.sent.find((s) => s.chatId === chatId && s.messageId === params.message_id);
    const edit: SentMessage = {
      method: 'editMessageText',
      chatId,
      threadId: target?.threadId,
      text: text ?? '',
      ...(typeof params.parse_mode === 'string' && { parseMode: params.parse_mode }),
      at: Date.now(),
      ...(target && { messageId: target.messageId }),
      ...(params.reply_markup !== undefined && { replyMarkup: params.reply_markup }),
    };
    if (this.failed(edit, reply)) return;
    const bad = !text
      ? 'message text is empty'
      : (FakeTelegram.refusal(edit, params.rich_message !== undefined) ??
        (!target
          ? 'message to edit not found'
          : this.current.get(target.messageId!) === text
            ? 'message is not modified: specified new message content and reply markup are exactly the same as a current content and reply markup of the message'
            : undefined));
    if (bad || !text || !target) {
      this.badRequest(reply, bad ?? '');
      return;
    }
    this.current.set(target.messageId!, text);
    this.edits.push(edit);
    reply(200, { ok: true, result: this.messageResult(edit) });
  }

  /** deleteMessage: a message this bot sent is gone (True back); 400 for one it never sent or already deleted. */
  private delete(params: Record<string, unknown>, reply: (status: number, body: unknown) => void): void {
    const chatId = String(params.chat_id);
    const target = this.sent.find((s) => s.chatId === chatId && s.messageId === params.message_id);
    const call: SentMessage = {
      method: 'deleteMessage',
      chatId,
      threadId: target?.threadId,
      text: '',
      at: Date.now(),
    };
    if (target) call.messageId = target.messageId;
    if (this.failed(call, reply)) return;
    if (!target || !this.current.has(target.messageId!)) {
      this.badRequest(reply, 'message to delete not found');
      return;
    }
    this.current.delete(target.messageId!);
    this.deleted.push(call);
    reply(200, { ok: true, result: true });
  }

  /** sendMessageDraft / sendRichMessageDraft: an ephemeral preview in a private chat (True back). */
  private draft(
    method: string,
    params: Record<string, unknown>,
    reply: (status: number, body: unknown) => void,
  ): void {
    const chatId = String(params.chat_id);
    const draft: SentDraft = {
      method,
      chatId,
      threadId: params.message_thread_id as number | undefined,
      text: FakeTelegram.textOf(params) ?? '',
      at: Date.now(),
      draftId: Number(params.draft_id),
    };
    if (this.failed(draft, reply)) return;
    const bad =
      !Number.isInteger(draft.draftId) || draft.draftId === 0
        ? 'draft_id must be non-zero'
        : chatId.startsWith('-')
          ? 'drafts can be sent to private chats only'
          : method === 'sendRichMessageDraft' && params.rich_message === undefined
            ? 'rich_message is required'
            : undefined;
    if (bad) {
      this.badRequest(reply, bad);
      return;
    }
    this.drafts.push(draft);
    reply(200, { ok: true, result: true });
  }

  private async send(
    method: string,
    params: Record<string, unknown>,
    reply: (status: number, body: unknown) => void,
    res: ServerResponse,
  ): Promise<void> {
    const message: SentMessage = {
      method,
      chatId: String(params.chat_id),
      threadId: params.message_thread_id as number | undefined,
      text: FakeTelegram.textOf(params) ?? '',
      ...(typeof params.parse_mode === 'string' && { parseMode: params.parse_mode }),
      at: Date.now(),
      ...(params.reply_markup !== undefined && { replyMarkup: params.reply_markup }),
    };
    if (this.failed(message, reply)) return;
    const refused = message.text
      ? FakeTelegram.refusal(message, method === 'sendRichMessage')
      : 'message text is empty';
    if (refused) {
      this.refused.push({ ...message, code: 400 });
      this.badRequest(reply, refused);
      return;
    }
    message.messageId = 10_000 + this.sent.length + 1;
    this.sent.push(message);
    this.current.set(message.messageId, message.text);
    const body = JSON.stringify({ ok: true, result: this.messageResult(message) });
    const act = this.onNextAccept;
    this.onNextAccept = undefined;
    const answer = () =>
      new Promise<void>((r) =>
        res.writeHead(200, { 'content-type': 'application/json' }).end(body, () => r()),
      );
    if (act) await act(answer, res);
    else await answer();
  }

  private async getUpdates(
    params: Record<string, unknown>,
    ok: (result: unknown) => void,
    gone: () => boolean,
  ): Promise<void> {
    this.getUpdatesCalls += 1;
    const offset = typeof params.offset === 'number' ? params.offset : 0;
    // Telegram forgets updates below the offset a client confirmed.
    while (this.updates.length > 0 && this.updates[0]!.update_id < offset) this.updates.shift();
    if (this.updates.length === 0) {
      // Long poll, but short: tests push updates and want them soon.
      const waitMs = Math.min(500, Number(params.timeout ?? 0) * 1000);
      await new Promise<void>((resolve) => {
        const timer = setTimeout(resolve, waitMs);
        this.waiting.push(() => {
          clearTimeout(timer);
          resolve();
        });
      });
    }
    // A poller that died while waiting gets nothing: nothing was handed out to it.
    if (gone()) return;
    const batch = this.updates.filter((u) => u.update_id >= offset).slice(0, Number(params.limit ?? 100));
    for (const u of batch) this.served.set(u.update_id, (this.served.get(u.update_id) ?? 0) + 1);
    ok(batch);
  }
}

let nextUpdateId = 500_000;
let nextMessageId = 1;

export interface TelegramMessageInput {
  chatId: number;
  chatType?: 'private' | 'group' | 'supergroup';
  text?: string;
  caption?: string;
  topicId?: number;
  from?: { id: number; username?: string; first_name?: string };
  photo?: boolean;
  entities?: Array<{ type: string; offset: number; length: number }>;
}

/** A Telegram `Update` carrying a new message, as Telegram would send it. */
export function messageUpdate(input: TelegramMessageInput): {
  update_id: number;
  message: Record<string, unknown>;
} {
  const from = input.from ?? { id: 42, username: 'alice', first_name: 'Alice' };
  const chatType = input.chatType ?? (input.chatId < 0 ? 'supergroup' : 'private');
  return {
    update_id: nextUpdateId++,
    message: {
      message_id: nextMessageId++,
      date: Math.floor(Date.now() / 1000),
      chat:
        chatType === 'private'
          ? { id: input.chatId, type: 'private', first_name: from.first_name, username: from.username }
          : {
              id: input.chatId,
              type: chatType,
              title: 'Test group',
              ...(input.topicId && { is_forum: true }),
            },
      from: { is_bot: false, ...from },
      ...(input.topicId !== undefined && { message_thread_id: input.topicId, is_topic_message: true }),
      ...(input.text !== undefined && { text: input.text }),
      ...(input.caption !== undefined && { caption: input.caption }),
      ...(input.entities && { entities: input.entities }),
      ...(input.photo && {
        photo: [
          { file_id: 'AgACAgSMALL', file_unique_id: 'uniqSmall', width: 90, height: 90, file_size: 1200 },
          { file_id: 'AgACAgBIG', file_unique_id: 'uniqBig', width: 1280, height: 960, file_size: 120_000 },
        ],
      }),
    },
  };
}

/**
 * A `callback_query` update: a person pressed an inline keyboard button with `data` under the
 * bot's message `messageId` in chat `chatId`.
 */
export function callbackQueryUpdate(input: {
  chatId: number;
  messageId: number;
  data: string;
  from?: { id: number; username?: string; first_name?: string };
}): { update_id: number; callback_query: Record<string, unknown> } {
  const from = input.from ?? { id: 42, username: 'alice', first_name: 'Alice' };
  const chatType = input.chatId < 0 ? 'supergroup' : 'private';
  return {
    update_id: nextUpdateId++,
    callback_query: {
      id: `cbq-${nextUpdateId}`,
      from: { is_bot: false, ...from },
      chat_instance: 'ci-1',
      data: input.data,
      message: {
        message_id: input.messageId,
        date: Math.floor(Date.now() / 1000),
        chat:
          chatType === 'private'
            ? { id: input.chatId, type: 'private', first_name: from.first_name }
            : { id: input.chatId, type: chatType, title: 'Test group' },
        from: { id: BOT.id, is_bot: true, first_name: 'Test Bot', username: BOT.username },
        text: 'card',
      },
    },
  };
}

import type { FastifyInstance } from 'fastify';
import { z } from 'zod';
import { answerMessageId, answerOf } from '../../shared/store/approvals.js';
import type { WatchedRun } from '../../shared/store/reply-streams.js';
import { refusal } from '../approvals.js';
import { HttpError } from '../errors.js';
import type { StreamSlot } from '../stream/clients.js';
import { hijackStream, reserveStream } from '../stream/hijack.js';
import { browserMessage } from '../ui/browser-view.js';
import { answeringMessage, answerProblem, type PageAnswer } from '../ui/page-answers.js';
import { UI_STREAM_HEADERS, UiReply, type UiReplyDeps } from '../ui/ui-reply.js';
import { toWebMessage } from '../ui/web-messages.js';
import { MAX_PARTS, messageIdSchema, toUserMessage, webPartSchema } from '../user-message.js';
import { parseChatKey, parseOrThrow, withRedis } from '../validation.js';
import { assertChat } from '../web-token.js';

/** The body DefaultChatTransport sends; fields an app adds through `body` are ignored. */
const uiBody = z.looseObject({
  id: z.string(),
  messages: z.array(z.unknown()).min(1).max(10_000),
  trigger: z.enum(['submit-message', 'regenerate-message']),
  messageId: z.string().nullish(),
});

/** The newest message: the one that is ingested. Parts as `useChat` builds them for a person. */
const newestMessage = z.looseObject({
  id: messageIdSchema,
  role: z.literal('user', { message: 'the newest message must be the user message to send' }),
  parts: z.array(webPartSchema).min(1).max(MAX_PARTS),
});

export interface UiRouteOptions {
  /** UI_WAIT_MS. */
  waitMs: number;
  /** After a turn's end event, how long its closing chunk may take (default 2 s). */
  endGraceMs?: number;
}

/**
 * The endpoints AI SDK `useChat` (its DefaultChatTransport, unchanged) talks to: `POST /v1/ui`
 * sends a message and streams the reply, `GET /v1/ui/:id/stream` resumes (204 when nothing
 * streams), `GET /v1/ui/:id/messages` gives the chat's messages, `POST /v1/ui/:id/stop` stops
 * the running turn. `:id` and the body's `id` are the chatKey. See docs/streaming.md.
 */
export async function uiRoutes(app: FastifyInstance, options: UiRouteOptions): Promise<void> {
  const { store } = app.chatlane.deps;
  const replies = app.chatlane.replies;
  /** One response in a slot the process counts (`reserveStream`) until the response closes. */
  const open = (slot: StreamSlot, about: Set<string>): UiReply => {
    let forget = (): void => undefined;
    const ui = new UiReply(
      {
        ...deps(),
        onClose: () => {
          forget();
          slot.release();
        },
      },
      slot.chatKey,
      about,
    );
    forget = app.chatlane.streams.adopt(ui);
    return ui;
  };
  const deps = (): UiReplyDeps => ({
    hub: app.chatlane.streams.sharedHub,
    replies,
    logger: app.chatlane.deps.logger,
    waitMs: options.waitMs,
    endGraceMs: options.endGraceMs ?? 2000,
    heartbeatMs: app.chatlane.streams.settings.heartbeatMs,
  });

  app.post('/ui', async (request, reply) => {
    const body = parseOrThrow(uiBody, request.body ?? undefined, 'body');
    const chatKey = parseChatKey(body.id);
    assertChat(request, chatKey);
    if (body.trigger === 'regenerate-message') {
      throw new HttpError(
        'UNSUPPORTED_TRIGGER',
        'regenerate-message is not supported: the chat history is the record; send a new message instead',
      );
    }
    const last = body.messages.at(-1) as { role?: unknown } | undefined;
    // useChat's addToolApprovalResponse sends the conversation again, ending with the assistant
    // message whose calls were answered (sendAutomaticallyWhen): the answers, not a message.
    if (last?.role === 'assistant') {
      const answers = parseOrThrow(answeringMessage, last, `messages.${body.messages.length - 1}`);
      const ui = await answerFromPage(chatKey, answers);
      ui.attach(hijackStream(reply, UI_STREAM_HEADERS));
      return;
    }
    const newest = parseOrThrow(newestMessage, body.messages.at(-1), `messages.${body.messages.length - 1}`);
    const message = toUserMessage(
      chatKey,
      { id: newest.id, parts: newest.parts, metadata: { channel: 'web' } },
      Date.now(),
    );
    const ui = open(reserveStream(app.chatlane.streams, chatKey), new Set([message.id]));
    try {
      // Watching starts before the message is stored: the turn that takes it cannot start unseen.
      await withRedis(() => ui.watchEvents());
      // The message marks the chat watched as it is stored: the turn that takes it streams.
      const result = await app.chatlane.ingest({ chatKey, message, watched: true });
      if (result.status === 'accepted') ui.awaitStart();
      else await withRedis(() => resendOf(ui, chatKey, message.id));
    } catch (err) {
      ui.close();
      throw err;
    }
    ui.attach(hijackStream(reply, UI_STREAM_HEADERS));
  });

  app.get('/ui/:id/stream', async (request, reply) => {
    const chatKey = parseChatKey((request.params as { id?: unknown }).id);
    // Taken before the read, so resumes racing for the last slot cannot all pass.
    const slot = reserveStream(app.chatlane.streams, chatKey);
    let run: WatchedRun | undefined;
    try {
      // A turn that does not stream answers too: the chat is now watched, so its commit
      // writes the whole reply to the run's stream, where this response waits for it.
      run = await withRedis(() => replies.watchRun(chatKey));
    } catch (err) {
      slot.release();
      throw err;
    }
    if (!run) {
      slot.release();
      return reply.code(204).send();
    }
    const ui = open(slot, new Set());
    try {
      await withRedis(async () => {
        await ui.watchEvents();
        await ui.follow(run.runId);
      });
    } catch (err) {
      ui.close();
      throw err;
    }
    ui.attach(hijackStream(reply, UI_STREAM_HEADERS));
  });

  app.get('/ui/:id/messages', async (request) => {
    const chatKey = parseChatKey((request.params as { id?: unknown }).id);
    const [history, pending] = await withRedis(() =>
      Promise.all([store.readHistory(chatKey), store.readAllPending(chatKey)]),
    );
    // Approval answers wait in the inbox as entries of their own: not a person's messages.
    const messages = [...history, ...pending.filter((m) => !answerOf(m))].map(toWebMessage);
    // A browser token reads a failure's code and a generic sentence; the API token, the detail.
    return {
      chatKey,
      messages: request.chatlaneWebChat === undefined ? messages : messages.map(browserMessage),
    };
  });

  app.post('/ui/:id/stop', async (request, reply) => {
    const chatKey = parseChatKey((request.params as { id?: unknown }).id);
    const status = await withRedis(() => replies.requestStop(chatKey));
    return reply.code(202).send({ chatKey, status });
  });

  /**
   * Answers from a page (approval/ui-answers.ts): each checked against its request (the call,
   * its input, its signature), stored once, then the reply of the turn that goes on, streamed.
   * Answers already stored (the page sent them again) follow that turn as a message sent again does.
   */
  async function answerFromPage(chatKey: string, answers: PageAnswer[]): Promise<UiReply> {
    const found = await app.chatlane.approvals.read(
      chatKey,
      answers.map((a) => a.approvalId),
    );
    for (const a of answers) {
      const problem = answerProblem(a, found.get(a.approvalId));
      if (problem) throw problem;
    }
    const ids = answers.map((a) => answerMessageId(a.approvalId));
    const ui = open(reserveStream(app.chatlane.streams, chatKey), new Set(ids));
    try {
      // Watching starts before the answers are stored: the turn that takes them cannot start
      // unseen. Each answer marks the chat watched as it is stored, so that turn streams.
      await withRedis(() => ui.watchEvents());
      let fresh = false;
      for (const a of answers) {
        const result = await app.chatlane.approvals.answer(
          chatKey,
          a.approvalId,
          { approved: a.approved, reason: a.reason, by: 'web', channel: 'web' },
          { watched: true },
        );
        if (result.status === 'accepted') fresh = true;
        else if (result.status !== 'answered') throw refusal(a.approvalId, result);
      }
      if (fresh) ui.awaitStart();
      else await withRedis(() => resendOf(ui, chatKey, ids[0]!));
    } catch (err) {
      ui.close();
      throw err;
    }
    return ui;
  }

  /**
   * A message sent again (same id): the reply of the turn that has it, if one is open; the
   * turn to come, if the message still waits; else nothing (the history holds its answer).
   */
  async function resendOf(ui: UiReply, chatKey: string, messageId: string): Promise<void> {
    const run = await replies.liveRun(chatKey);
    if (run) {
      const entries = await replies.read(chatKey, run);
      if (entries.some((e) => e.kind === 'answers' && e.messageIds.includes(messageId))) {
        await ui.follow(run, [messageId]);
        return;
      }
    }
    const pending = await store.readAllPending(chatKey);
    if (pending.some((m) => m.id === messageId)) ui.awaitStart();
    else ui.end();
  }
}

import { DefaultChatTransport, readUIMessageStream, type UIMessage, type UIMessageChunk } from 'ai';
import { describe, expect, it } from 'vitest';
import { mintWebToken } from '../../src/shared/web-token.js';
import { stepThrough } from '../helpers/held-stream.js';
import { waitFor } from '../helpers/redis.js';
import { useStack } from '../helpers/stack.js';
import { NodeChat, textOf } from '../helpers/ui-chat.js';

/**
 * The AI SDK's own client (AbstractChat, which useChat wraps, with the unchanged
 * DefaultChatTransport) against a real ingress and worker processes and the mock model
 * streaming its answer chunk by chunk.
 */

const SECRET = 'web-token-secret-for-the-ui-stream-tests';
const LONG = 'the quick brown fox jumps over the lazy dog while the cat watches';

async function chatFor(url: string, chatKey: string): Promise<NodeChat> {
  return new NodeChat(url, chatKey, await mintWebToken(SECRET, chatKey));
}

async function transportFor(url: string, chatKey: string) {
  return new DefaultChatTransport({
    api: `${url}/v1/ui`,
    headers: { authorization: `Bearer ${await mintWebToken(SECRET, chatKey)}` },
  });
}

async function chunksOf(stream: ReadableStream<UIMessageChunk> | null): Promise<UIMessageChunk[]> {
  const out: UIMessageChunk[] = [];
  if (!stream) return out;
  for await (const chunk of stream) out.push(chunk);
  return out;
}

/** The text of the message a client assembles from these chunks. */
async function assembledText(chunks: UIMessageChunk[]): Promise<string> {
  const stream = new ReadableStream<UIMessageChunk>({
    start(controller) {
      for (const chunk of chunks) controller.enqueue(chunk);
      controller.close();
    },
  });
  let text = '';
  for await (const message of readUIMessageStream({ stream })) text = textOf(message);
  return text;
}

function userMessage(id: string, text: string): UIMessage {
  return { id, role: 'user', parts: [{ type: 'text', text }] };
}

/** The distinct texts a page showed for a reply, in order. */
function grownTexts(chat: NodeChat, id: string): string[] {
  const texts: string[] = [];
  for (const f of chat.store.frames) if (f.id === id && f.text !== texts.at(-1)) texts.push(f.text);
  return texts.filter((t) => t !== '');
}

describe('/v1/ui with DefaultChatTransport', () => {
  const stack = useStack('e2e-ui', { roles: ['ingress', 'worker'], env: { WEB_TOKEN_SECRET: SECRET } });
  const { store } = stack;

  it('send: the chat_send text grows over several frames before the turn commits, and ends as the committed reply', async () => {
    const gates = stack.mock.state.chunkGates;
    gates.hold('ui-send');
    const chat = await chatFor(stack.ingressUrl(), 'ui-send');
    const sending = chat.sendMessage({ text: LONG });
    await stepThrough(gates, 'ui-send', `echo: ${LONG}`, async () => textOf(chat.reply));
    await sending;

    expect(chat.status).toBe('ready');
    expect(chat.error).toBeUndefined();
    const reply = chat.lastMessage!;
    expect(reply.role).toBe('assistant');
    expect(textOf(reply)).toBe(`echo: ${LONG}`);
    const texts = grownTexts(chat, reply.id);
    expect(texts.length).toBeGreaterThanOrEqual(3);
    for (let i = 1; i < texts.length; i++) expect(texts[i]!.startsWith(texts[i - 1]!)).toBe(true);

    const committed = (await store.readEvents('ui-send', undefined, 100)).find(
      (e) => e.type === 'turn.committed',
    );
    const firstText = chat.store.frames.find((f) => f.id === reply.id && f.text !== '')!;
    expect(firstText.at).toBeLessThan(committed!.ts);
    // The streamed message is the committed one.
    const history = await store.readHistory('ui-send');
    expect(history.map((m) => m.role)).toEqual(['user', 'assistant']);
    expect(history[1]!.id).toBe(reply.id);
    expect((await store.readOutbox('ui-send', undefined, 10)).map((o) => o.text)).toEqual([`echo: ${LONG}`]);
  }, 30_000);

  it('resume: a second client on the chat replays the reply from its first chunk, then follows it to the end', async () => {
    const gates = stack.mock.state.chunkGates;
    gates.hold('ui-resume');
    const url = stack.ingressUrl();
    const first = await chatFor(url, 'ui-resume');
    const sending = first.sendMessage({ text: LONG });
    // Two pieces out, the rest held until the second client has caught up: the reply is
    // still under way when it comes, however slowly it connects.
    gates.next('ui-resume');
    await waitFor(async () => textOf(first.reply).length > 12, { what: 'the reply under way' });

    const second = await chatFor(url, 'ui-resume');
    const resuming = second.resumeStream();
    const sofar = textOf(first.reply);
    await waitFor(async () => textOf(second.reply) === sofar, { what: 'the second client replaying' });
    gates.release('ui-resume');
    await resuming;
    await sending;
    expect(sofar.length).toBeLessThan(`echo: ${LONG}`.length);
    expect(textOf(second.lastMessage)).toBe(`echo: ${LONG}`);
    expect(second.lastMessage!.id).toBe(first.lastMessage!.id);
    // It replayed from the start: the first text it showed was a prefix, not a later piece.
    expect(`echo: ${LONG}`.startsWith(grownTexts(second, second.lastMessage!.id)[0]!)).toBe(true);
  }, 30_000);

  it('resume where nothing streams: 204, the page keeps its messages', async () => {
    const url = stack.ingressUrl();
    const res = await fetch(`${url}/v1/ui/ui-idle/stream`, {
      headers: { authorization: `Bearer ${await mintWebToken(SECRET, 'ui-idle')}` },
    });
    expect(res.status).toBe(204);
    const chat = await chatFor(url, 'ui-idle');
    await chat.resumeStream();
    expect(chat.messages).toEqual([]);
    expect(chat.status).toBe('ready');
  });

  it('a message sent again with the same id is stored once: during the turn it follows the same reply, after it nothing more', async () => {
    const gates = stack.mock.state.chunkGates;
    // Held from its first piece until the message is sent again: the turn is still under way
    // then, however slowly the second send comes.
    gates.hold('ui-resend');
    const url = stack.ingressUrl();
    const transport = await transportFor(url, 'ui-resend');
    const message = userMessage('resend-1', LONG);
    const send = () =>
      transport.sendMessages({
        chatId: 'ui-resend',
        messages: [message],
        trigger: 'submit-message',
        messageId: undefined,
        abortSignal: undefined,
      });
    const firstChunks = chunksOf(await send());
    await waitFor(
      async () =>
        (await store.readEvents('ui-resend', undefined, 50)).some((e) => e.type === 'reply.started'),
      {
        what: 'the turn started',
      },
    );
    const again = await send();
    gates.release('ui-resend');
    const againChunks = await chunksOf(again);
    expect(await assembledText(againChunks)).toBe(`echo: ${LONG}`);
    const first = await firstChunks;
    expect(first.at(-1)?.type).toBe('finish');
    // The same reply: the one message the first send follows.
    expect(againChunks[0]).toEqual(first[0]);

    const late = await chunksOf(await send());
    expect(late).toEqual([]);
    const history = await store.readHistory('ui-resend');
    expect(history.filter((m) => m.id === 'resend-1')).toHaveLength(1);
    expect(history.filter((m) => m.role === 'assistant')).toHaveLength(1);
    expect(await store.readOutbox('ui-resend', undefined, 10)).toHaveLength(1);
  }, 30_000);

  it('stop: the running turn ends early and commits what it did; the next message is answered', async () => {
    const whole = `echo: ${LONG} ${LONG}`;
    const gates = stack.mock.state.chunkGates;
    // Held from its first piece: the stop comes while the reply streams. The turn reads a stop
    // at its next reply write, so the reply then goes on a piece at a time, each once the page
    // shows the last, until it ends: stopped, within a piece or two; not, at its whole text.
    gates.hold('ui-stop');
    const url = stack.ingressUrl();
    const chat = await chatFor(url, 'ui-stop');
    const sending = chat.sendMessage({ text: `${LONG} ${LONG}` });
    const streaming = () => chat.status === 'submitted' || chat.status === 'streaming';
    try {
      await waitFor(async () => textOf(chat.reply).length > 6, { what: 'the reply under way' });
      const stop = await fetch(`${url}/v1/ui/ui-stop/stop`, {
        method: 'POST',
        headers: { authorization: `Bearer ${await mintWebToken(SECRET, 'ui-stop')}` },
      });
      expect(stop.status).toBe(202);
      expect(await stop.json()).toEqual({ chatKey: 'ui-stop', status: 'stopping' });
      while (streaming() && textOf(chat.reply) !== whole) {
        const before = textOf(chat.reply);
        gates.next('ui-stop');
        await waitFor(async () => !streaming() || textOf(chat.reply) !== before, {
          what: 'the next piece or the end of the reply',
        });
      }
    } finally {
      gates.release('ui-stop');
    }
    await sending;
    expect(chat.status).toBe('ready');
    expect(textOf(chat.lastMessage).length).toBeLessThan(whole.length);

    const events = (await store.readEvents('ui-stop', undefined, 100)).map((e) => e.type);
    expect(events).toContain('turn.stop-requested');
    expect(events).toContain('turn.committed');
    expect(await store.pendingCount('ui-stop')).toBe(0);
    // The send was cut short before it ran: nothing reached the outbox.
    expect(await store.readOutbox('ui-stop', undefined, 10)).toEqual([]);

    await chat.sendMessage({ text: 'again' });
    // The stopped turn sent nothing: the model answers both messages now.
    expect(textOf(chat.lastMessage)).toBe(`${whole} | again`);
  }, 30_000);

  it('a message that joins the running turn gets that turn’s remaining reply, from where it joined', async () => {
    const gates = stack.mock.state.chunkGates;
    // The first step held from its first piece until the second message is in: it joins the
    // running turn, however slowly it comes.
    gates.hold('ui-merge');
    const url = stack.ingressUrl();
    const first = await chatFor(url, 'ui-merge');
    const sending = first.sendMessage({ text: LONG });
    await waitFor(async () => textOf(first.reply).length > 6, { what: 'the first reply under way' });

    // Sent while the first step streams: the turn folds it in before its next step.
    const transport = await transportFor(url, 'ui-merge');
    const joined = await transport.sendMessages({
      chatId: 'ui-merge',
      messages: [userMessage('merge-2', 'second thought')],
      trigger: 'submit-message',
      messageId: undefined,
      abortSignal: undefined,
    });
    // Answered once the message is in the chat's inbox.
    gates.release('ui-merge');
    const chunks = await chunksOf(joined);
    await sending;
    const text = await assembledText(chunks);
    expect(text).toBe('echo: second thought');
    expect(chunks[0]).toEqual({ type: 'start', messageId: first.reply!.id });
    expect(chunks.at(-1)?.type).toBe('finish');
    const events = (await store.readEvents('ui-merge', undefined, 100)).map((e) => e.type);
    expect(events).toContain('reply.merged');
    expect(events.filter((t) => t === 'turn.committed')).toHaveLength(1);
  }, 30_000);

  it('GET /v1/ui/:id/messages gives the chat as a page shows it: chat_send as text', async () => {
    const url = stack.ingressUrl();
    const res = await fetch(`${url}/v1/ui/ui-send/messages`, {
      headers: { authorization: `Bearer ${await mintWebToken(SECRET, 'ui-send')}` },
    });
    const body = (await res.json()) as { messages: UIMessage[] };
    expect(body.messages.map((m) => [m.role, textOf(m)])).toEqual([
      ['user', LONG],
      ['assistant', `echo: ${LONG}`],
    ]);
  });
});

/** Short leases and locks: the takeover comes within a few seconds. */
const FAST_RECOVERY = { TURN_LEASE_MS: '1500', JOB_LOCK_MS: '1500', STALLED_INTERVAL_MS: '500' };

describe('a worker killed mid-reply', () => {
  const stack = useStack('e2e-ui-kill', {
    roles: ['ingress'],
    env: { WEB_TOKEN_SECRET: SECRET, ...FAST_RECOVERY },
  });
  const { store } = stack;

  it('kill -9 while the reply streams: clients get an abort, then the takeover’s reply; nothing is stuck and the reply is committed and sent once', async () => {
    const gates = stack.mock.state.chunkGates;
    // Held from its first piece until the worker is dead: it dies while the reply streams.
    gates.hold('ui-kill');
    const url = stack.ingressUrl();
    const doomed = await stack.start('worker');
    const chat = await chatFor(url, 'ui-kill');
    const sending = chat.sendMessage({ text: LONG });
    await waitFor(async () => textOf(chat.reply).length > 6, { what: 'the reply under way' });
    const halfId = chat.reply!.id;

    await doomed.kill('SIGKILL');
    // The takeover's reply streams unheld.
    gates.release('ui-kill');
    // A page reloaded after the kill resumes: the half reply, its abort, then the takeover's.
    const resumed = chunksOf(
      await (await transportFor(url, 'ui-kill')).reconnectToStream({ chatId: 'ui-kill' }),
    );
    await stack.start('worker');
    await sending;

    expect(chat.status).toBe('ready');
    const reply = chat.lastMessage!;
    expect(reply.id).not.toBe(halfId);
    const texts = reply.parts.flatMap((p) => (p.type === 'text' ? [p.text] : []));
    expect(texts.at(-1)).toBe(`echo: ${LONG}`);

    const chunks = await resumed;
    const types = chunks.map((c) => c.type);
    expect(types).toContain('abort');
    expect(types.at(-1)).toBe('finish');
    const starts = chunks.filter((c) => c.type === 'start') as Array<{ messageId?: string }>;
    expect(starts.map((s) => s.messageId)).toEqual([halfId, reply.id]);

    const history = await store.readHistory('ui-kill');
    expect(history.filter((m) => m.role === 'assistant')).toHaveLength(1);
    expect(history.find((m) => m.role === 'assistant')!.id).toBe(reply.id);
    expect((await store.readOutbox('ui-kill', undefined, 10)).map((o) => o.text)).toEqual([`echo: ${LONG}`]);
    // Nothing streams any more.
    const after = await fetch(`${url}/v1/ui/ui-kill/stream`, {
      headers: { authorization: `Bearer ${await mintWebToken(SECRET, 'ui-kill')}` },
    });
    expect(after.status).toBe(204);
  }, 60_000);
});

const API_TOKEN = 'an-api-token-for-the-ui-stream-tests-000';

describe('a worker killed during a turn that does not stream', () => {
  const stack = useStack('e2e-ui-kill-whole', {
    roles: ['ingress'],
    env: { WEB_TOKEN_SECRET: SECRET, API_TOKEN, ...FAST_RECOVERY },
  });
  const { store } = stack;

  it('kill -9 while a reader waits on an unstreamed turn: the reader follows the takeover and gets its whole reply; one reply is sent', async () => {
    const chatKey = 'ui-kill-whole';
    const url = stack.ingressUrl();
    stack.mock.state.hold(chatKey);
    const doomed = await stack.start('worker');
    // An API message: nobody watches the chat, so its turn calls the model without streaming.
    const sent = await fetch(`${url}/v1/chats/${chatKey}/messages`, {
      method: 'POST',
      headers: { 'content-type': 'application/json', authorization: `Bearer ${API_TOKEN}` },
      body: JSON.stringify({ id: 'm1', text: LONG }),
    });
    expect(sent.status).toBe(202);
    await stack.mock.state.waitForRequest(chatKey, 1);
    expect(stack.mock.state.recorded(chatKey).map((r) => r.stream)).toEqual([false]);
    expect(await stack.redis.keys(`${stack.prefix}:{c:${chatKey}}:ui:*`)).toEqual([]);

    const reader = new AbortController();
    // Without a takeover to follow, the reader would wait on the dead run until it gives up.
    const giveUp = setTimeout(() => reader.abort(), 30_000);
    const res = await fetch(`${url}/v1/ui/${chatKey}/stream`, {
      headers: { authorization: `Bearer ${await mintWebToken(SECRET, chatKey)}` },
      signal: reader.signal,
    });
    expect(res.status).toBe(200);
    const body = res.text();

    await doomed.kill('SIGKILL');
    stack.mock.state.release(chatKey);
    await stack.start('worker');
    const text = await body.finally(() => clearTimeout(giveUp));

    const chunks = text
      .split('\n\n')
      .filter((l) => l.startsWith('data: ') && l !== 'data: [DONE]')
      .map((l) => JSON.parse(l.slice('data: '.length)) as UIMessageChunk);
    expect(chunks.map((c) => c.type)).not.toContain('error');
    expect(chunks.at(-1)?.type).toBe('finish');
    expect(await assembledText(chunks)).toBe(`echo: ${LONG}`);
    expect(text.endsWith('data: [DONE]\n\n')).toBe(true);

    const events = await store.readEvents(chatKey, undefined, 100);
    expect(events.map((e) => e.type)).toContain('lease.takeover');
    expect((await store.readOutbox(chatKey, undefined, 10)).map((o) => o.text)).toEqual([`echo: ${LONG}`]);
    const history = await store.readHistory(chatKey);
    expect(history.filter((m) => m.role === 'assistant')).toHaveLength(1);
  }, 60_000);
});

import { createTelegramAdapter, type TelegramAdapter } from '@chat-adapter/telegram';
import { afterEach, describe, expect, it } from 'vitest';
import { BOT, FakeTelegram, type FakeTelegramOptions } from '../../src/fake-telegram/server.js';

/**
 * The fake Bot API against the real @chat-adapter/telegram, the way a Bot API 10.1 server
 * answers it: rich messages, drafts in private chats, edits; and a server older than 10.1,
 * where the adapter takes its fallbacks.
 */

let fake: FakeTelegram;
afterEach(() => fake?.close());

async function adapterFor(
  options: FakeTelegramOptions = {},
): Promise<{ fake: FakeTelegram; adapter: TelegramAdapter }> {
  fake = await new FakeTelegram(options).start();
  const adapter = createTelegramAdapter({
    botToken: BOT.token,
    apiUrl: fake.url,
    mode: 'webhook',
    allowUnverifiedWebhooks: true,
    userName: BOT.username,
    nativeStreaming: true,
    // Telegram's own pacing (1.1 s / 3.1 s between edits) would make the tests slow.
    streamingEditIntervalMs: 40,
    logger: { debug() {}, info() {}, warn() {}, error() {}, child: () => silent },
  });
  return { fake, adapter };
}
const silent = { debug() {}, info() {}, warn() {}, error() {}, child: () => silent };

/** Text that arrives in pieces, a little apart, as a model writes it. */
async function* pieces(parts: string[], gapMs = 30): AsyncIterable<string> {
  for (const part of parts) {
    await new Promise((r) => setTimeout(r, gapMs));
    yield part;
  }
}

const PARTS = ['The ', 'quick ', 'brown ', 'fox ', 'jumps ', 'over ', 'the ', 'lazy ', 'dog.'];
const FULL = PARTS.join('');

/** Each text extends the one before it. */
function growing(texts: string[]): boolean {
  return texts.every((t, i) => i === 0 || (t.length > texts[i - 1]!.length && t.startsWith(texts[i - 1]!)));
}

describe('a Bot API 10.1 server', () => {
  it('takes a Markdown post as sendRichMessage with the markdown as given', async () => {
    const { fake, adapter } = await adapterFor();
    await adapter.postMessage(adapter.encodeThreadId({ chatId: '42' }), { markdown: 'a *b* c_d' });
    expect(fake.sentTo(42).map((s) => [s.method, s.text])).toEqual([['sendRichMessage', 'a *b* c_d']]);
  });

  it('streams a reply to a private chat as growing drafts of one draft_id, then sends the final message', async () => {
    const { fake, adapter } = await adapterFor();
    const sent = await adapter.stream(adapter.encodeThreadId({ chatId: '43' }), pieces(PARTS), {
      updateIntervalMs: 20,
    });
    const drafts = fake.draftsTo(43);
    expect(drafts.length).toBeGreaterThanOrEqual(3);
    expect(new Set(drafts.map((d) => d.method))).toEqual(new Set(['sendRichMessageDraft']));
    expect(new Set(drafts.map((d) => d.draftId)).size).toBe(1);
    expect(growing(drafts.map((d) => d.text))).toBe(true);
    expect(drafts.at(-1)!.text).toBe(FULL);
    // A draft is ephemeral: the reply persists only through the message sent after it.
    expect(fake.sentTo(43).map((s) => [s.method, s.text])).toEqual([['sendRichMessage', FULL]]);
    expect(sent?.id).toContain(String(fake.sentTo(43)[0]!.messageId));
  });

  it('streams to a group by posting and editing the post as the text grows', async () => {
    const { fake, adapter } = await adapterFor();
    await adapter.stream(adapter.encodeThreadId({ chatId: '-100500' }), pieces(PARTS, 60));
    const [post] = fake.sentTo(-100500);
    expect(fake.sentTo(-100500)).toHaveLength(1);
    const edits = fake.editsTo(-100500);
    expect(edits.length).toBeGreaterThanOrEqual(2);
    expect(edits.every((e) => e.messageId === post!.messageId)).toBe(true);
    expect(growing(edits.map((e) => e.text))).toBe(true);
    expect(fake.textNow(post!.messageId)).toBe(FULL);
    expect(fake.draftsTo(-100500)).toEqual([]);
  });

  it("waits out a 429's retry_after mid-stream, then edits the post to the full text", async () => {
    const { fake, adapter } = await adapterFor();
    fake.failNext(-100501, {
      code: 429,
      description: 'Too Many Requests: retry after 1',
      retryAfter: 1,
      methods: ['editMessageText'],
    });
    await adapter.stream(adapter.encodeThreadId({ chatId: '-100501' }), pieces(PARTS, 60));
    const [refused] = fake.refused.filter((r) => r.chatId === '-100501');
    const [post] = fake.sentTo(-100501);
    expect(refused?.method).toBe('editMessageText');
    const after = fake.editsTo(-100501).filter((e) => e.at > refused!.at);
    expect(after.length).toBeGreaterThanOrEqual(1);
    expect(after[0]!.at - refused!.at).toBeGreaterThanOrEqual(950);
    expect(fake.textNow(post!.messageId)).toBe(FULL);
  });

  it('refuses drafts to a group, a zero draft_id, and an edit of a message it never sent', async () => {
    ({ fake } = await adapterFor());
    const call = async (method: string, body: Record<string, unknown>) => {
      const res = await fetch(`${fake.url}/bot${BOT.token}/${method}`, {
        method: 'POST',
        headers: { 'content-type': 'application/json' },
        body: JSON.stringify(body),
      });
      return { status: res.status, body: (await res.json()) as { description?: string } };
    };
    const group = await call('sendMessageDraft', { chat_id: -100, draft_id: 1, text: 'x' });
    expect(group.status).toBe(400);
    const zero = await call('sendRichMessageDraft', {
      chat_id: 5,
      draft_id: 0,
      rich_message: { markdown: 'x' },
    });
    expect(zero.body.description).toMatch(/draft_id/);
    const edit = await call('editMessageText', { chat_id: 5, message_id: 99, text: 'x' });
    expect([edit.status, edit.body.description]).toEqual([400, 'Bad Request: message to edit not found']);
    expect(fake.drafts).toEqual([]);
    expect(fake.edits).toEqual([]);
  });
});

describe('a server older than Bot API 10.1 (no rich messages)', () => {
  it('answers 404 to sendRichMessage, so a post falls back to sendMessage', async () => {
    const { fake, adapter } = await adapterFor({ richMessages: false });
    await adapter.postMessage(adapter.encodeThreadId({ chatId: '44' }), { markdown: 'plain words' });
    expect(fake.sentTo(44).map((s) => [s.method, s.text])).toEqual([['sendMessage', 'plain words']]);
    expect(fake.refused).toEqual([]);
  });

  it('answers 404 to sendRichMessageDraft, so a private stream uses sendMessageDraft and sendMessage', async () => {
    const { fake, adapter } = await adapterFor({ richMessages: false });
    await adapter.stream(adapter.encodeThreadId({ chatId: '45' }), pieces(PARTS), { updateIntervalMs: 20 });
    const drafts = fake.draftsTo(45);
    expect(drafts.length).toBeGreaterThanOrEqual(3);
    expect(new Set(drafts.map((d) => d.method))).toEqual(new Set(['sendMessageDraft']));
    expect(growing(drafts.map((d) => d.text))).toBe(true);
    expect(fake.sentTo(45).map((s) => s.method)).toEqual(['sendMessage']);
    expect(fake.sentTo(45)[0]!.text.replace(/\\/g, '')).toBe(FULL);
  });
});

import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { waitReady } from '../../src/shared/redis.js';
import { answerApproval, listApprovals } from '../../src/shared/store/approvals.js';
import { REPLY_WATCH_MS } from '../../src/shared/store/reply-streams.js';
import { mintWebToken } from '../../src/shared/web-token.js';
import { runTurn } from '../../src/worker/turn/turn.js';
import { type RefundWorker, refundWorker, toolParts } from '../helpers/approvals.js';
import { queueMetaWritten, type TestIngress, testIngress } from '../helpers/ingress.js';
import { userMessage } from '../helpers/messages.js';
import { deleteLabel, keysUnder, randomPrefix, testRedis } from '../helpers/redis.js';

/**
 * Tool approval over HTTP (docs/approvals.md, docs/http-api.md): `GET /v1/chats/:chatKey/approvals`
 * lists a chat's open requests, `POST …/approvals/:approvalId` answers one (202, then 409 for
 * any second answer, 404 for an unknown id), and `POST /v1/ui` takes the answer useChat sends
 * after `addToolApprovalResponse` and streams the turn that goes on. Refusals write nothing.
 * Turns run in-process (the worker's own wiring, an `ai/test` model).
 */

const LABEL = 'apprhttp';
const API_TOKEN = 'api-token-for-the-approvals-tests-0123456789';
const SECRET = 'a-web-token-secret-of-at-least-32-characters';
const redis = testRedis('ingress');
let prefix: string;
let ing: TestIngress;
let worker: RefundWorker;

beforeAll(async () => {
  await waitReady(redis);
  prefix = randomPrefix(LABEL);
  ing = await testIngress(redis, prefix, {
    apiToken: API_TOKEN,
    web: { tokenSecret: SECRET, waitMs: 30_000 },
  });
  await queueMetaWritten(redis, prefix);
  worker = refundWorker(redis, prefix);
});
afterAll(async () => {
  await ing.close();
  await deleteLabel(redis, LABEL);
  redis.disconnect();
});

const api = { authorization: `Bearer ${API_TOKEN}` };

/** A chat whose refund of `order` waits for a person: its approval request's id. */
async function waiting(chatKey: string, order = '42'): Promise<{ id: string; toolCallId: string }> {
  await ing.store.ingest(chatKey, userMessage(chatKey, `m-${order}`, `refund ${order}`, { userId: 'u1' }), {
    maxPending: 100,
    dedupWindowMs: 60_000,
  });
  expect((await runTurn(worker.deps, chatKey)).status).toBe('done');
  const part = toolParts(await ing.store.readHistory(chatKey), 'refund').findLast(
    (p) => p.state === 'approval-requested',
  )!;
  return { id: part.approval!.id, toolCallId: part.toolCallId };
}

function answer(chatKey: string, id: string, body: unknown, headers: Record<string, string> = api) {
  return ing.app.inject({
    method: 'POST',
    url: `/v1/chats/${chatKey}/approvals/${id}`,
    headers,
    payload: body as Record<string, unknown>,
  });
}

describe('GET /v1/chats/:chatKey/approvals', () => {
  it('lists the open requests with their id, tool, input and expiry; none once answered', async () => {
    const { id, toolCallId } = await waiting('list-1');
    const res = await ing.app.inject({ method: 'GET', url: '/v1/chats/list-1/approvals', headers: api });
    expect(res.statusCode).toBe(200);
    expect(res.json()).toEqual({
      chatKey: 'list-1',
      approvals: [
        {
          id,
          toolCallId,
          tool: 'refund',
          input: { order: '42' },
          requestedAt: expect.any(Number),
          expiresAt: expect.any(Number),
        },
      ],
    });
    expect(res.json().approvals[0].expiresAt - res.json().approvals[0].requestedAt).toBe(86_400_000);
    expect((await answer('list-1', id, { approved: false })).statusCode).toBe(202);
    const after = await ing.app.inject({ method: 'GET', url: '/v1/chats/list-1/approvals', headers: api });
    expect(after.json().approvals).toEqual([]);
  });
});

describe('POST /v1/chats/:chatKey/approvals/:approvalId', () => {
  it('answers 202 once, queues the chat its turn, and that turn runs the call; a second answer is 409 and changes nothing', async () => {
    const { id } = await waiting('answer-1');
    const res = await answer('answer-1', id, { approved: true, reason: 'fine' });
    expect(res.statusCode).toBe(202);
    expect(res.json()).toEqual({ chatKey: 'answer-1', approvalId: id, status: 'accepted' });
    const jobs = await ing.turns.getJobs(['waiting', 'delayed', 'prioritized']);
    expect(jobs.some((j) => j.data.chatKey === 'answer-1')).toBe(true);

    const second = await answer('answer-1', id, { approved: false });
    expect(second.statusCode).toBe(409);
    expect(second.json().error.code).toBe('APPROVAL_RESOLVED');
    expect((await listApprovals(ing.store, 'answer-1'))[0]?.answer).toMatchObject({
      approved: true,
      reason: 'fine',
    });

    expect((await runTurn(worker.deps, 'answer-1')).status).toBe('done');
    expect(toolParts(await ing.store.readHistory('answer-1'), 'refund')).toEqual([
      expect.objectContaining({ state: 'output-available', output: { refunded: '42' } }),
    ]);
    const settled = await answer('answer-1', id, { approved: false });
    expect(settled.statusCode).toBe(409);
    expect(settled.json().error.message).toContain('settled (approved)');
  });

  it('refuses an unknown id (404), a bad body or chat key (400), writing nothing', async () => {
    const { id } = await waiting('refuse-1');
    const before = (await keysUnder(redis, prefix)).sort();
    const inbox = await ing.store.pendingCount('refuse-1');
    const unknown = await answer('refuse-1', 'aitxt-nosuchrequest', { approved: true });
    expect(unknown.statusCode).toBe(404);
    expect(unknown.json().error.code).toBe('APPROVAL_NOT_FOUND');
    expect((await answer('other-chat', id, { approved: true })).statusCode).toBe(404);
    expect((await answer('refuse-1', 'not an id!', { approved: true })).json().error.code).toBe(
      'APPROVAL_NOT_FOUND',
    );
    for (const body of [
      {},
      { approved: 'yes' },
      { approved: true, reason: '' },
      { approved: true, extra: 1 },
    ]) {
      const res = await answer('refuse-1', id, body);
      expect(res.statusCode).toBe(400);
      expect(res.json().error.code).toBe('VALIDATION_FAILED');
    }
    expect((await answer('bad{key}', id, { approved: true })).json().error.code).toBe('INVALID_CHAT_KEY');
    expect((await keysUnder(redis, prefix)).sort()).toEqual(before);
    expect(await ing.store.pendingCount('refuse-1')).toBe(inbox);
    expect((await listApprovals(ing.store, 'refuse-1'))[0]?.state).toBe('open');
  });

  it("takes a browser token for its own chat, and refuses it for another chat's requests (403)", async () => {
    const { id } = await waiting('web-1');
    const mine = `Bearer ${await mintWebToken(SECRET, 'web-1', 600)}`;
    const theirs = `Bearer ${await mintWebToken(SECRET, 'web-2', 600)}`;
    const listed = await ing.app.inject({
      method: 'GET',
      url: '/v1/chats/web-1/approvals',
      headers: { authorization: mine },
    });
    expect(listed.json().approvals).toHaveLength(1);
    const refused = await answer('web-1', id, { approved: true }, { authorization: theirs });
    expect(refused.statusCode).toBe(403);
    expect(refused.json().error.code).toBe('FORBIDDEN');
    const ok = await answer('web-1', id, { approved: true }, { authorization: mine });
    expect(ok.statusCode).toBe(202);
    expect((await listApprovals(ing.store, 'web-1'))[0]?.answer?.by).toBe('web');
  });
});

/** The body useChat's transport sends after addToolApprovalResponse: the history, last message answered. */
async function uiAnswer(chatKey: string, edit: (part: Record<string, unknown>) => void = () => undefined) {
  const res = await ing.app.inject({ method: 'GET', url: `/v1/ui/${chatKey}/messages`, headers: api });
  const messages = res.json().messages as Array<{
    id: string;
    role: string;
    parts: Array<Record<string, unknown>>;
  }>;
  const last = messages.at(-1)!;
  for (const part of last.parts) {
    if (part.state !== 'approval-requested') continue;
    part.state = 'approval-responded';
    part.approval = { ...(part.approval as object), approved: true };
    edit(part);
  }
  return { id: chatKey, messages, trigger: 'submit-message', messageId: last.id };
}

describe('POST /v1/ui with an approval answer (useChat addToolApprovalResponse)', () => {
  it('stores the answer and streams the turn that goes on, as the same assistant message', async () => {
    const { id, toolCallId } = await waiting('ui-1');
    const history = await ing.store.readHistory('ui-1');
    const asked = history.at(-1)!.id;
    const body = await uiAnswer('ui-1');
    const response = ing.app.inject({ method: 'POST', url: '/v1/ui', headers: api, payload: body });
    // The answer is stored before the turn that applies it can start, and marks the chat
    // watched in the same script: that turn streams.
    await expect.poll(() => ing.store.pendingCount('ui-1'), { timeout: 10_000 }).toBe(1);
    const watchMs = await redis.pttl(ing.store.keys('ui-1').watch);
    expect(watchMs).toBeGreaterThan(0);
    expect(watchMs).toBeLessThanOrEqual(REPLY_WATCH_MS);
    expect((await runTurn(worker.deps, 'ui-1')).status).toBe('done');
    const res = await response;
    expect(res.statusCode).toBe(200);
    const chunks = res.body
      .split('\n\n')
      .filter((l) => l.startsWith('data: {'))
      .map((l) => JSON.parse(l.slice(6)) as Record<string, unknown>);
    expect(chunks[0]).toEqual({ type: 'start', messageId: asked });
    expect(chunks).toContainEqual({ type: 'tool-output-available', toolCallId, output: { refunded: '42' } });
    expect(chunks.at(-1)).toEqual({ type: 'finish' });
    expect(res.body).toContain('refund: ');
    expect((await listApprovals(ing.store, 'ui-1'))[0]).toMatchObject({
      state: 'resolved',
      answer: { approved: true, by: 'web' },
      request: { id },
    });
  });

  it('refuses an answer whose call input was changed on the page (400 APPROVAL_MISMATCH) or whose request is unknown (404), writing nothing', async () => {
    await waiting('ui-2');
    const before = (await keysUnder(redis, prefix)).sort();
    const changed = await uiAnswer('ui-2', (part) => {
      part.input = { order: '9999' };
    });
    const res = await ing.app.inject({ method: 'POST', url: '/v1/ui', headers: api, payload: changed });
    expect(res.statusCode).toBe(400);
    expect(res.json().error.code).toBe('APPROVAL_MISMATCH');
    const forged = await uiAnswer('ui-2', (part) => {
      part.approval = { ...(part.approval as object), signature: 'forged' };
    });
    const res2 = await ing.app.inject({ method: 'POST', url: '/v1/ui', headers: api, payload: forged });
    expect(res2.json().error.code).toBe('APPROVAL_MISMATCH');
    const unknown = await uiAnswer('ui-2', (part) => {
      part.approval = { ...(part.approval as object), id: 'aitxt-unknown' };
    });
    const res3 = await ing.app.inject({ method: 'POST', url: '/v1/ui', headers: api, payload: unknown });
    expect(res3.statusCode).toBe(404);
    const unanswered = await ing.app.inject({
      method: 'POST',
      url: '/v1/ui',
      headers: api,
      payload: {
        id: 'ui-2',
        messages: [{ id: 'a', role: 'assistant', parts: [{ type: 'text', text: 'hi' }] }],
        trigger: 'submit-message',
      },
    });
    expect(unanswered.statusCode).toBe(400);
    expect(unanswered.json().error.code).toBe('VALIDATION_FAILED');
    expect((await keysUnder(redis, prefix)).sort()).toEqual(before);
    expect((await listApprovals(ing.store, 'ui-2'))[0]?.state).toBe('open');
  });

  it('refuses an answer to a request settled meanwhile (409), leaving the chat unwatched', async () => {
    const { id } = await waiting('ui-3');
    const body = await uiAnswer('ui-3');
    expect((await answer('ui-3', id, { approved: false })).statusCode).toBe(202);
    expect((await runTurn(worker.deps, 'ui-3')).status).toBe('done');
    const res = await ing.app.inject({ method: 'POST', url: '/v1/ui', headers: api, payload: body });
    expect(res.statusCode).toBe(409);
    expect(res.json().error.code).toBe('APPROVAL_RESOLVED');
    expect(await redis.exists(ing.store.keys('ui-3').watch)).toBe(0);
  });
});

describe('an answer stored with a watch TTL (approval-answer.lua)', () => {
  it('marks the chat watched for an answer sent again, never for a refused one, and not without a TTL', async () => {
    const { id } = await waiting('watch-1');
    const watch = ing.store.keys('watch-1').watch;
    const web = { approved: true, by: 'web' };
    const unknown = await answerApproval(ing.store, 'watch-1', 'aitxt-unknown', web, {
      supersede: false,
      watchMs: 5_000,
    });
    expect(unknown).toEqual({ status: 'unknown' });
    expect(await redis.exists(watch)).toBe(0);
    const first = await answerApproval(ing.store, 'watch-1', id, web, { supersede: false });
    expect(first.status).toBe('accepted');
    expect(await redis.exists(watch)).toBe(0);
    const again = await answerApproval(ing.store, 'watch-1', id, web, { supersede: false, watchMs: 5_000 });
    expect(again.status).toBe('answered');
    const watchMs = await redis.pttl(watch);
    expect(watchMs).toBeGreaterThan(0);
    expect(watchMs).toBeLessThanOrEqual(5_000);
  });
});

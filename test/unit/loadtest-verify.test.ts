import { describe, expect, it } from 'vitest';
import type { HistoryMessage } from '../../src/loadtest/api.js';
import type { CommitEvent, MessageRecord, SeenOutboxItem } from '../../src/loadtest/chat-state.js';
import { steadyRate } from '../../src/loadtest/report.js';
import { type ChatEvidence, verify } from '../../src/loadtest/verify.js';

/**
 * The end-of-run checks on crafted evidence: a clean chat passes, and each kind of
 * violation — lost, duplicated, reordered, unanswered, pending, overlapping turns, model
 * overlap, failed sends — is caught by its own check.
 */

const T0 = 1_700_000_000_000;

function sent(id: string, index: number, sentAt: number): MessageRecord {
  return {
    chat: 0,
    index,
    id,
    text: id,
    sentAt,
    ackAt: sentAt + 2,
    ackMs: 2,
    attempts: 1,
    outcome: 'accepted',
  };
}

const user = (id: string, ts: number): HistoryMessage => ({ id, role: 'user', metadata: { ts } });
const assistant = (runId: string): HistoryMessage => ({
  id: `${runId}-a0`,
  role: 'assistant',
  metadata: { runId },
});
const reply = (id: string, runId: string, ts: number, seenAt: number): SeenOutboxItem => ({
  id,
  text: `echo ${id}`,
  ts,
  runId,
  seenAt,
});
const commit = (runId: string, ts: number, ms: number, consumed = 1): CommitEvent => ({
  runId,
  ts,
  consumed,
  merged: 0,
  ms,
  fence: undefined,
  worker: undefined,
});

/** Two messages answered by two turns, one after the other. */
function cleanChat(): ChatEvidence {
  return {
    key: 'lt-x-0',
    messages: [sent('m0', 0, 0), sent('m1', 1, 500)],
    sequence: [user('m0', T0), assistant('r1'), user('m1', T0 + 500), assistant('r2')],
    pending: [],
    outbox: [reply('1-0', 'r1', T0 + 100, 120), reply('2-0', 'r2', T0 + 600, 650)],
    commits: [commit('r1', T0 + 200, 195), commit('r2', T0 + 700, 190)],
    firstSentAt: 0,
  };
}

const failing = (v: ReturnType<typeof verify>) => v.invariants.filter((i) => !i.ok).map((i) => i.name);

describe('loadtest verification', () => {
  it('a clean run passes every check and measures each reply from send to first sight', () => {
    const v = verify([cleanChat()], []);
    expect(failing(v)).toEqual([]);
    expect(v.e2eMs).toEqual([120, 150]);
    expect(v.answeredAt).toEqual([120, 650]);
    expect(v.chats[0]).toMatchObject({ acked: 2, answered: 2, completionMs: 650, maxWaitMs: 150 });
    expect(v.duplicates).toMatchObject({ uncommittedReplies: 0, repeatedTexts: 0 });
  });

  it('without a mock model the model check is skipped, not passed silently', () => {
    const model = verify([cleanChat()], undefined).invariants.find((i) => i.name === 'model-serial');
    expect(model).toMatchObject({ ok: true, skipped: true });
  });

  it('an acknowledged message missing from history is lost', () => {
    const chat = cleanChat();
    chat.sequence = chat.sequence.filter((m) => m.id !== 'm0');
    const v = verify([chat], []);
    expect(failing(v)).toEqual(['acked-once']);
    expect(v.invariants.find((i) => i.name === 'acked-once')?.examples[0]).toMatch(/m0: .*lost/);
    expect(v.fate).toEqual({ lost: 1, pendingAtEnd: 0, committedTwice: 0, outOfOrder: 0 });
  });

  it('a message committed twice is caught', () => {
    const chat = cleanChat();
    chat.sequence.push(user('m1', T0 + 500), assistant('r3'));
    chat.outbox.push(reply('3-0', 'r3', T0 + 900, 950));
    const v = verify([chat], []);
    expect(failing(v)).toEqual(['acked-once']);
    expect(v.fate.committedTwice).toBe(1);
  });

  it('messages out of acknowledgement order are caught', () => {
    const chat = cleanChat();
    chat.sequence = [user('m1', T0), assistant('r1'), user('m0', T0 + 500), assistant('r2')];
    const v = verify([chat], []);
    expect(failing(v)).toEqual(['order']);
    expect(v.fate.outOfOrder).toBe(1);
  });

  it('a chat whose last message got no committed reply is unanswered; a pending one is pending', () => {
    const chat = cleanChat();
    chat.sequence = chat.sequence.slice(0, 2);
    chat.pending = [user('m1', T0 + 500)];
    const v = verify([chat], []);
    expect(failing(v).sort()).toEqual(['acked-once', 'answered', 'nothing-pending']);
    expect(v.messagesWithoutReply).toBe(0);
    expect(v.fate).toEqual({ lost: 0, pendingAtEnd: 1, committedTwice: 0, outOfOrder: 0 });

    const silent = cleanChat();
    silent.outbox = silent.outbox.filter((o) => o.runId !== 'r2');
    const w = verify([silent], []);
    expect(failing(w)).toEqual(['answered']);
    expect(w.messagesWithoutReply).toBe(1);
  });

  it('two committed turns of one chat overlapping in time are caught', () => {
    const chat = cleanChat();
    // r2 ran 600 ms and committed 300 ms after r1: it started 300 ms before r1 committed.
    chat.commits = [commit('r1', T0 + 200, 195), commit('r2', T0 + 500, 600)];
    expect(failing(verify([chat], []))).toEqual(['turns-serial']);
  });

  it('two model requests of one chat at once (mock /stats) are caught, for our chats only', () => {
    expect(failing(verify([cleanChat()], [{ chatKey: 'lt-x-0', inFlight: 2, at: T0 }]))).toEqual([
      'model-serial',
    ]);
    expect(failing(verify([cleanChat()], [{ chatKey: 'someone-else', inFlight: 2, at: T0 }]))).toEqual([]);
  });

  it('a send that failed for good fails the run; nothing acknowledged at all fails it too', () => {
    const chat = cleanChat();
    chat.messages.push({
      chat: 0,
      index: 2,
      id: 'm2',
      text: 'm2',
      sentAt: 900,
      attempts: 4,
      outcome: 'failed',
      lastError: '503 REDIS_UNAVAILABLE',
    });
    expect(failing(verify([chat], []))).toEqual(['sends-acknowledged']);

    const none = cleanChat();
    none.messages = none.messages.map((m) => ({ ...m, outcome: 'failed' as const }));
    none.sequence = [];
    none.outbox = [];
    expect(failing(verify([none], []))).toEqual(expect.arrayContaining(['sends-acknowledged', 'acked-once']));
  });

  it('a merged message is answered by the later reply of the same turn', () => {
    const chat = cleanChat();
    // m1 arrived mid-turn r1 and was merged: r1 replied twice, the second after m1's arrival.
    chat.sequence = [
      user('m0', T0),
      assistant('r1'),
      user('m1', T0 + 300),
      { ...assistant('r1'), id: 'r1-a1' },
    ];
    chat.outbox = [reply('1-0', 'r1', T0 + 100, 120), reply('1-1', 'r1', T0 + 400, 420)];
    chat.messages[1]!.sentAt = 290;
    chat.commits = [commit('r1', T0 + 450, 445, 2)];
    const v = verify([chat], []);
    expect(failing(v)).toEqual([]);
    expect(v.e2eMs).toEqual([120, 130]);
  });

  it('replies of turns that never committed are counted as duplicates, with their ids', () => {
    const chat = cleanChat();
    chat.outbox.splice(1, 0, reply('1-9', 'dead-run', T0 + 150, 160));
    chat.outbox.push({ ...reply('2-1', 'r2', T0 + 610, 660), text: 'echo 2-0' });
    const v = verify([chat], []);
    expect(failing(v)).toEqual([]);
    expect(v.duplicates).toEqual({
      answeredTwice: 0,
      answeredTwiceIds: [],
      uncommittedReplies: 1,
      uncommittedReplyIds: ['lt-x-0/1-9'],
      repeatedTexts: 1,
      repeatedTextIds: ['lt-x-0/2-1'],
      redeliveries: 0,
      redeliveredIds: [],
    });
  });

  it('a message quoted by two replies (a takeover answering it again) counts as answered twice', () => {
    const chat = cleanChat();
    chat.outbox = [
      { ...reply('1-0', 'dead-run', T0 + 100, 120), text: 'echo: m0' },
      { ...reply('1-1', 'r1', T0 + 150, 160), text: 'echo: m0' },
      { ...reply('2-0', 'r2', T0 + 600, 650), text: 'echo: m1' },
    ];
    const v = verify([chat], []);
    expect(v.duplicates).toMatchObject({ answeredTwice: 1, answeredTwiceIds: ['lt-x-0/m0'] });
  });

  it('delivered to a receiver: replies are timed at delivery, redeliveries counted, an undelivered reply fails', () => {
    const chat = cleanChat();
    chat.deliveries = new Map([
      ['1-0', { chatKey: chat.key, id: '1-0', at: 110, count: 1 }],
      ['2-0', { chatKey: chat.key, id: '2-0', at: 640, count: 3 }],
    ]);
    const v = verify([chat], []);
    expect(failing(v)).toEqual([]);
    expect(v.invariants.find((i) => i.name === 'delivered')).toMatchObject({ ok: true, violations: 0 });
    expect(v.invariants.find((i) => i.name === 'delivered')?.skipped).toBeUndefined();
    expect(v.e2eMs).toEqual([110, 140]);
    expect(v.duplicates).toMatchObject({ redeliveries: 2, redeliveredIds: ['lt-x-0/2-0×3'] });

    chat.deliveries.delete('2-0');
    const w = verify([chat], []);
    expect(failing(w)).toEqual(['delivered']);
    expect(w.invariants.find((i) => i.name === 'delivered')?.examples[0]).toMatch(/2-0: never delivered/);
  });

  it('a webhook message is found in history under the id the deployment stored it as', () => {
    const chat = cleanChat();
    chat.messages = chat.messages.map((m) => ({ ...m, storedId: `loadtest:${m.id}` }));
    chat.sequence = chat.sequence.map((h) => (h.role === 'user' ? { ...h, id: `loadtest:${h.id}` } : h));
    expect(failing(verify([chat], []))).toEqual([]);
  });
});

describe('loadtest steady rate', () => {
  it('is the slope of answered-so-far over the window, blind to the delay before the first reply', () => {
    // One reply every 100 ms from 2 s on (10/s), after a 2 s silence: the window average would say less.
    const at = Array.from({ length: 80 }, (_, i) => 2000 + i * 100);
    expect(steadyRate(at, 2500, 10_000)).toBeCloseTo(10, 5);
    expect(steadyRate([], 0, 1000)).toBeNaN();
  });
});

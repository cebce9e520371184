import { setMaxListeners } from 'node:events';
import { ChatlaneApi, type MockStats, readMockStats, type Transport } from './api.js';
import { ChatState, type MessageRecord } from './chat-state.js';
import { collectEvidence } from './collect.js';
import { BudgetExhaustedError, HttpClient, RequestBudget } from './http.js';
import type { LoadtestOptions } from './options.js';
import { OutboxPoller, type ReplyWatcher } from './replies.js';
import { buildReport, type LoadtestReport } from './report.js';
import {
  buildSchedule,
  chatKeyOf,
  messageIdOf,
  messageTextOf,
  type Schedule,
  type Step,
} from './schedule.js';
import { StreamWatcher, streamAvailable } from './stream-watcher.js';
import { verify } from './verify.js';
import { ReplyReceiver, WebhookTransport } from './webhook.js';

/**
 * One load test: build the schedule, send it (open model or closed loop) while a watcher
 * follows replies, drain, then collect every chat's history and check the invariants.
 */

export interface LiveCounters {
  planned: number;
  sent: number;
  acked: number;
  failed: number;
  answered: number;
  errors: number;
  elapsedMs: number;
  phase: 'sending' | 'draining' | 'verifying' | 'done';
  /** Recent acknowledgement latencies (ms), for a running p99. */
  recentAckMs: number[];
  /** Recent send → commit-seen latencies (ms): a live estimate; the report's figure is exact. */
  recentAnswerMs: number[];
}

export interface RunHooks {
  /** Called about every `intervalMs` while the run goes on. */
  onProgress?: (live: LiveCounters) => void;
  progressIntervalMs?: number;
  /** Aborts sending and draining (e.g. SIGINT); the report is still written. */
  signal?: AbortSignal;
  /**
   * Asked about once a second while draining; true ends the drain. For a caller that can read
   * the deployment's own state: a reply the watcher saw that died with a failed-over Redis
   * primary is never delivered, so the watcher's view alone waits out the whole drain for it.
   */
  settled?: (chats: readonly ChatState[]) => Promise<boolean>;
}

/** Everything a caller (the chaos run, tests) may want beyond the report. */
export interface LoadtestResult {
  report: LoadtestReport;
  chats: ChatState[];
  schedule: Schedule;
  modelStats: MockStats | undefined;
}

const RECENT = 5000;
const BACKOFF_BASE_MS = 100;
const BACKOFF_MAX_MS = 2000;
const SETTLED_POLL_MS = 1000;

class Recent {
  readonly values: number[] = [];
  private at = 0;
  push(v: number): void {
    if (this.values.length < RECENT) this.values.push(v);
    else {
      this.values[this.at] = v;
      this.at = (this.at + 1) % RECENT;
    }
  }
}

const sleep = (ms: number, signal?: AbortSignal) =>
  new Promise<void>((resolve) => {
    if (ms <= 0 || signal?.aborted) return resolve();
    const timer = setTimeout(done, ms);
    function done() {
      clearTimeout(timer);
      signal?.removeEventListener('abort', done);
      resolve();
    }
    signal?.addEventListener('abort', done, { once: true });
  });

/** Resolves when `signal` aborts — at once if it already has. */
function whenAborted(signal: AbortSignal): Promise<void> {
  if (signal.aborted) return Promise.resolve();
  return new Promise((resolve) => signal.addEventListener('abort', () => resolve(), { once: true }));
}

export async function runLoadtest(opts: LoadtestOptions, hooks: RunHooks = {}): Promise<LoadtestResult> {
  const t0 = performance.now();
  const startedAt = new Date();
  const now = () => performance.now() - t0;
  const cpu0 = process.cpuUsage();

  const budget = new RequestBudget(opts.maxRequests);
  const http = new HttpClient(opts.url, {
    connections: opts.maxInflight,
    timeoutMs: opts.timeoutMs,
    budget,
    token: opts.token,
  });
  const mockHttp = opts.mockUrl
    ? new HttpClient(opts.mockUrl, { connections: 2, timeoutMs: opts.timeoutMs, budget })
    : undefined;
  const api = new ChatlaneApi(http);

  const schedule = buildSchedule(opts);
  const byKey = new Map<string, ChatState>();
  const chats = schedule.chats.map((steps, c) => {
    const chat = new ChatState(c, chatKeyOf(opts.runId, c));
    chat.expectDeliveries = opts.via === 'webhook';
    byKey.set(chat.key, chat);
    for (let m = 0; m < opts.messages; m++) {
      chat.messages.push({
        chat: c,
        index: m,
        id: messageIdOf(opts.runId, c, m),
        text: messageTextOf(opts.runId, c, m, opts.textBytes),
        attempts: 0,
        outcome: 'unsent',
      });
    }
    if (steps.length === 0) chat.sendingOver = true;
    return chat;
  });

  let receiver: ReplyReceiver | undefined;
  let transport: Transport = api;
  if (opts.via === 'webhook') {
    const secret = opts.webhookSecret ?? '';
    receiver = new ReplyReceiver(secret, now, (d) => {
      const chat = byKey.get(d.chatKey);
      if (!chat) return;
      chat.deliveries.set(d.id, d);
      chat.notify();
    });
    const listening = await receiver.listen(opts.receiver.host, opts.receiver.port);
    transport = new WebhookTransport(http, opts.source, secret, opts.replyUrl ?? listening);
  }

  // Errors are counted per attempt: a send retried three times shows three errors.
  const errorsByCode: Record<string, number> = {};
  const errorsByStatus: Record<string, number> = {};
  const pollErrorsByCode: Record<string, number> = {};
  const ackMs: number[] = [];
  const recentAck = new Recent();
  const recentAnswer = new Recent();
  const live: LiveCounters = {
    planned: schedule.messages,
    sent: 0,
    acked: 0,
    failed: 0,
    answered: 0,
    errors: 0,
    elapsedMs: 0,
    phase: 'sending',
    recentAckMs: recentAck.values,
    recentAnswerMs: recentAnswer.values,
  };
  let retries = 0;
  let duplicatesAcked = 0;
  let firstAckAt: number | undefined;
  let lastAckAt: number | undefined;
  let maxScheduleLagMs = 0;
  let aborted: string | undefined;

  const stop = new AbortController();
  const abort = (reason: string) => {
    aborted ??= reason;
    stop.abort();
  };
  hooks.signal?.addEventListener('abort', () => abort('interrupted'), { once: true });

  const modelBefore = mockHttp
    ? await readMockStats(mockHttp, `lt-${opts.runId}-`).catch(() => undefined)
    : undefined;
  if (mockHttp && !modelBefore) {
    // Checked up front: a wrong --mock-url would otherwise only show after the whole run.
    await http.close();
    await mockHttp.close();
    await receiver?.close();
    throw new Error(`--mock-url ${opts.mockUrl?.href}: no chatlane mock-llm /stats there`);
  }

  const watchHooks = {
    now,
    onError: (code: string) => {
      pollErrorsByCode[code] = (pollErrorsByCode[code] ?? 0) + 1;
    },
    onFatal: (err: Error) => abort(err.message),
  };
  const poller = new OutboxPoller(
    api,
    { intervalMs: opts.pollIntervalMs, concurrency: opts.pollConcurrency },
    watchHooks,
  );
  let watcher: ReplyWatcher = poller;
  let streams: StreamWatcher | undefined;
  if (opts.replies !== 'poll') {
    // A chat of this run that is never written to: the stream opens and closes, nothing else.
    const probe = await streamAvailable(http, `lt-${opts.runId}-probe`);
    if (probe.ok) {
      streams = new StreamWatcher(http, poller, { maxStreams: opts.maxStreams }, watchHooks);
      watcher = streams;
    } else if (opts.replies === 'stream') {
      await poller.close();
      await http.close();
      await mockHttp?.close();
      await receiver?.close();
      throw new Error(`--replies stream: the deployment serves no live stream (${probe.reason})`);
    }
  }

  // Live estimate of answered messages: the k-th acked message of a chat is answered once
  // its committed turns consumed k messages.
  const answeredUpTo = new Map<ChatState, number>();
  const tickAnswered = () => {
    let answered = 0;
    for (const chat of chats) {
      const order = chat.ackedInOrder;
      const upTo = Math.min(chat.consumed, order.length);
      const from = answeredUpTo.get(chat) ?? 0;
      for (let i = from; i < upTo; i++) {
        const rec = order[i]!;
        if (rec.sentAt !== undefined) recentAnswer.push((chat.lastReplySeenAt ?? now()) - rec.sentAt);
      }
      answeredUpTo.set(chat, upTo);
      answered += upTo;
    }
    live.answered = answered;
  };

  const send = async (chat: ChatState, rec: MessageRecord): Promise<void> => {
    rec.outcome = 'sending';
    rec.sentAt = now();
    if (rec.dueAt !== undefined) maxScheduleLagMs = Math.max(maxScheduleLagMs, rec.sentAt - rec.dueAt);
    chat.firstSentAt ??= rec.sentAt;
    live.sent++;
    for (;;) {
      rec.attempts++;
      let outcome: Awaited<ReturnType<Transport['send']>>;
      try {
        outcome = await transport.send({ chat: chat.index, chatKey: chat.key, id: rec.id, text: rec.text });
      } catch (err) {
        if (err instanceof BudgetExhaustedError) abort(err.message);
        rec.outcome = 'failed';
        rec.lastError = (err as Error).message;
        live.failed++;
        return;
      }
      if (outcome.ok) {
        const at = now();
        rec.outcome = outcome.status;
        const storedId = outcome.storedId ?? rec.id;
        rec.storedId = storedId;
        rec.ackAt = at;
        rec.ackMs = outcome.ms;
        ackMs.push(outcome.ms);
        recentAck.push(outcome.ms);
        if (outcome.status === 'duplicate') duplicatesAcked++;
        firstAckAt ??= at;
        lastAckAt = at;
        chat.noteAcked(rec, storedId);
        live.acked++;
        watcher.watch(chat);
        return;
      }
      live.errors++;
      errorsByCode[outcome.code] = (errorsByCode[outcome.code] ?? 0) + 1;
      const status = outcome.httpStatus === undefined ? 'no response' : String(outcome.httpStatus);
      errorsByStatus[status] = (errorsByStatus[status] ?? 0) + 1;
      rec.lastError = `${outcome.httpStatus ?? ''} ${outcome.code}: ${outcome.message}`.trim();
      if (!outcome.retryable || rec.attempts > opts.retries || stop.signal.aborted) {
        rec.outcome = 'failed';
        live.failed++;
        return;
      }
      retries++;
      await sleep(Math.min(BACKOFF_MAX_MS, BACKOFF_BASE_MS * 2 ** (rec.attempts - 1)), stop.signal);
    }
  };

  const sendStep = async (chat: ChatState, step: Step, stepStart: number) => {
    for (let j = 0; j < step.count; j++) {
      if (stop.signal.aborted) return;
      const rec = chat.messages[step.first + j]!;
      await sleep(stepStart + step.offsetsMs[j]! - now(), stop.signal);
      if (stop.signal.aborted) return;
      await send(chat, rec);
    }
  };

  const progressTimer = setInterval(() => {
    tickAnswered();
    live.elapsedMs = now();
    hooks.onProgress?.(live);
  }, hooks.progressIntervalMs ?? 1000);

  const durationMs = opts.durationS * 1000;
  const sendDeadline = new AbortController();
  const deadlineTimer = setTimeout(() => sendDeadline.abort(), durationMs);
  const sendingStopped = AbortSignal.any([stop.signal, sendDeadline.signal]);
  // Every simulated user sleeps on these signals at once.
  setMaxListeners(0, stop.signal, sendDeadline.signal, sendingStopped);
  let cutByDuration = false;

  try {
    if (schedule.mode === 'open') {
      const chains = new Map<ChatState, Promise<void>>();
      for (const arrival of schedule.arrivals) {
        if (arrival.atMs > durationMs) {
          cutByDuration = true;
          break;
        }
        await sleep(arrival.atMs - now(), sendingStopped);
        if (sendingStopped.aborted) {
          cutByDuration = !stop.signal.aborted;
          break;
        }
        const chat = chats[arrival.chat]!;
        const step = schedule.chats[arrival.chat]![arrival.step]!;
        for (let j = 0; j < step.count; j++)
          chat.messages[step.first + j]!.dueAt = arrival.atMs + step.offsetsMs[j]!;
        // A chat's sends stay in order: the next waits for the previous acknowledgement.
        chat.sendsInFlight++;
        const chain = (chains.get(chat) ?? Promise.resolve())
          .then(() => sendStep(chat, step, arrival.atMs))
          .finally(() => {
            chat.sendsInFlight--;
            if (arrival.step === schedule.chats[arrival.chat]!.length - 1) chat.sendingOver = true;
            chat.notify();
          });
        chains.set(chat, chain);
      }
      await Promise.all(chains.values());
    } else {
      let next = 0;
      const stopped = whenAborted(sendingStopped);
      const user = async () => {
        while (!sendingStopped.aborted) {
          const c = next++;
          if (c >= chats.length) return;
          const chat = chats[c]!;
          for (const step of schedule.chats[c]!) {
            if (step.thinkMs > 0) await sleep(step.thinkMs, sendingStopped);
            if (sendingStopped.aborted) break;
            chat.sendsInFlight++;
            try {
              await sendStep(chat, step, now());
            } finally {
              chat.sendsInFlight--;
            }
            chat.notify();
            // Closed loop: the next message waits for the reply to this one.
            await Promise.race([chat.whenAnswered(), stopped]);
          }
          chat.sendingOver = true;
        }
      };
      await Promise.all(Array.from({ length: opts.connections }, user));
      cutByDuration =
        sendDeadline.signal.aborted && !stop.signal.aborted && chats.some((c) => !c.sendingOver);
    }
  } finally {
    clearTimeout(deadlineTimer);
  }
  const sendEndedAt = now();

  // Drain: wait for the last replies, bounded.
  live.phase = 'draining';
  const drainTimer = new AbortController();
  const drainTimeout = setTimeout(() => drainTimer.abort(), opts.drainS * 1000);
  const drainStop = AbortSignal.any([stop.signal, drainTimer.signal]);
  const drainOver = new AbortController();
  const asked = hooks.settled;
  let settled = false;
  const settling = async () => {
    const over = AbortSignal.any([drainStop, drainOver.signal]);
    while (asked && !over.aborted) {
      if (await asked(chats).catch(() => false)) {
        settled = true;
        return;
      }
      await sleep(SETTLED_POLL_MS, over);
    }
    await whenAborted(over);
  };
  await Promise.race([Promise.all(chats.map((c) => c.whenAnswered())), whenAborted(drainStop), settling()]);
  drainOver.abort();
  clearTimeout(drainTimeout);
  const drainedAt = now();
  const drainTimedOut = !settled && !chats.every((c) => c.answered);
  for (const c of chats) c.releaseAll();
  await watcher.close();
  tickAnswered();

  // Collect and verify. The budget still applies; a budget abort leaves what was read.
  live.phase = 'verifying';
  let evidence: Awaited<ReturnType<typeof collectEvidence>> = [];
  let collectError: string | undefined;
  try {
    evidence = await collectEvidence(api, chats, opts.pollConcurrency * 2, now);
  } catch (err) {
    collectError = (err as Error).message;
  }
  let modelStats: MockStats | undefined;
  if (mockHttp) modelStats = await readMockStats(mockHttp, `lt-${opts.runId}-`).catch(() => undefined);
  const verification = verify(evidence, modelStats?.violations);
  clearInterval(progressTimer);
  live.phase = 'done';
  live.elapsedMs = now();
  hooks.onProgress?.(live);

  await http.close();
  await mockHttp?.close();
  await receiver?.close();
  const cpu = process.cpuUsage(cpu0);

  const report = buildReport({
    opts,
    startedAt,
    schedule,
    chats,
    verification,
    timing: {
      sendEndedAt,
      drainedAt,
      finishedAt: now(),
      firstAckAt,
      lastAckAt,
      drainTimedOut,
      cutByDuration,
      maxScheduleLagMs,
    },
    ackMs,
    errors: { byCode: errorsByCode, byStatus: errorsByStatus, pollByCode: pollErrorsByCode, retries },
    duplicatesAcked,
    requests: budget.used,
    cpu,
    transport: transport.name,
    watcher: {
      ...(receiver
        ? { name: 'delivery to replyTo', resolutionMs: 0 }
        : { name: watcher.name, resolutionMs: watcher.resolutionMs() }),
      streams: streams
        ? {
            opened: streams.stats.opened,
            reconnects: streams.stats.reconnects,
            chatsPolled: streams.chatsPolled,
          }
        : null,
    },
    receiverRejected: receiver?.rejected,
    modelStats,
    modelBefore,
    aborted:
      aborted ?? (collectError ? `could not collect the chats' histories: ${collectError}` : undefined),
  });
  return { report, chats, schedule, modelStats };
}

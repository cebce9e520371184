import type { MockStats } from './api.js';
import { type BurstReport, burstReport } from './bursts.js';
import type { ChatState } from './chat-state.js';
import type { LoadtestOptions } from './options.js';
import type { Schedule } from './schedule.js';
import { jainIndex, type Summary, summarize } from './stats.js';
import type { InvariantResult, Verification } from './verify.js';

/** The JSON report (`--out`, `--json`) and its human summary. */

export interface ReportInput {
  opts: LoadtestOptions;
  startedAt: Date;
  schedule: Schedule;
  chats: ChatState[];
  verification: Verification;
  timing: {
    sendEndedAt: number;
    drainedAt: number;
    finishedAt: number;
    firstAckAt: number | undefined;
    lastAckAt: number | undefined;
    drainTimedOut: boolean;
    cutByDuration: boolean;
    maxScheduleLagMs: number;
  };
  ackMs: number[];
  errors: {
    byCode: Record<string, number>;
    byStatus: Record<string, number>;
    pollByCode: Record<string, number>;
    retries: number;
  };
  duplicatesAcked: number;
  requests: number;
  cpu: NodeJS.CpuUsage;
  transport: string;
  watcher: { name: string; resolutionMs: number; streams: StreamStats | null };
  modelStats: MockStats | undefined;
  modelBefore: MockStats | undefined;
  /** Replies the receiver refused (bad signature or body); only with the webhook transport. */
  receiverRejected?: number | undefined;
  aborted: string | undefined;
}

/** What the live-stream watcher did (null when replies were polled). */
export interface StreamStats {
  /** Stream connections opened (first ones and resumptions). */
  opened: number;
  /** Streams that ended or broke and were resumed with Last-Event-ID. */
  reconnects: number;
  /** Chats whose replies were polled instead: over --max-streams, or the stream refused. */
  chatsPolled: number;
}

export interface LoadtestReport {
  tool: 'chatlane loadtest';
  ok: boolean;
  aborted: string | null;
  startedAt: string;
  target: string;
  runId: string;
  settings: Record<string, unknown>;
  schedule: { messages: number; steps: number; bursts: number; lastArrivalS: number | null };
  messages: {
    planned: number;
    sent: number;
    acked: number;
    ackedAsDuplicate: number;
    failed: number;
    notSent: number;
    answered: number;
    withoutReply: number;
    /** Acknowledged messages not in history (and not pending) after the drain. */
    lost: number;
    pendingAtEnd: number;
    committedTwice: number;
    outOfOrder: number;
  };
  timing: {
    sendingS: number;
    drainS: number;
    totalS: number;
    cutByDuration: boolean;
    drainTimedOut: boolean;
    maxScheduleLagMs: number;
  };
  acks: { perSecond: number; latencyMs: Summary };
  replies: {
    /** Messages answered ÷ time until the last reply (drain included). */
    perSecond: number;
    /**
     * The rate under load: slope of the cumulative count of answered messages over the last
     * three quarters of the sending phase (least squares), so the first replies' delay does not count.
     */
    perSecondWhileSending: number;
    latencyMs: Summary;
    observedBy: string;
    resolutionMs: number;
    streams: StreamStats | null;
  };
  turns: {
    committed: number;
    messagesPerTurn: number;
    mergedMessages: number;
    turnsWithMerges: number;
    /** How long committed turns ran (turn.committed `ms`: lease taken → commit), ms. */
    durationMs: Summary;
    takeovers: number;
    events: Record<string, number>;
    /**
     * Model tokens of the committed turns, from their turn.committed events: totals, input +
     * output per turn, and the share of input the provider read from its prompt cache.
     */
    tokens: {
      input: number;
      cachedInput: number;
      output: number;
      perTurn: Summary;
      cachedShare: number | null;
    };
  };
  fairness: {
    chatCompletionMs: Summary;
    chatMaxWaitMs: Summary;
    jainIndexOfMeanWait: number;
    worstChat: { chatKey: string; maxWaitMs: number } | null;
  };
  errors: {
    sendsByStatus: Record<string, number>;
    sendsByCode: Record<string, number>;
    pollsByCode: Record<string, number>;
    retries: number;
  };
  model: {
    requests: number;
    requestsPerTurn: number;
    maxInFlightPerChat: number;
    overlaps: number;
  } | null;
  duplicates: Verification['duplicates'];
  /** `--profile typing`: model calls and replies per burst, and the wait after a burst's last message. */
  bursts: BurstReport | null;
  deliveries: { received: number; redeliveries: number; rejected: number } | null;
  client: { transport: string; requests: number; cpuS: number; cpuPctOfOneCore: number };
  invariants: InvariantResult[];
}

const r = (v: number, digits = 1) => {
  if (!Number.isFinite(v)) return Number.NaN;
  const f = 10 ** digits;
  return Math.round(v * f) / f;
};

/** Least-squares slope of "answered so far" against time within [from, to] ms, per second. */
export function steadyRate(answeredAt: number[], from: number, to: number): number {
  const ts = answeredAt.filter((t) => t >= from && t <= to).sort((a, b) => a - b);
  if (ts.length < 2) return Number.NaN;
  const n = ts.length;
  const meanT = ts.reduce((s, t) => s + t, 0) / n;
  const meanI = (n - 1) / 2;
  let cov = 0;
  let varT = 0;
  ts.forEach((t, i) => {
    cov += (t - meanT) * (i - meanI);
    varT += (t - meanT) ** 2;
  });
  return varT === 0 ? Number.NaN : (cov / varT) * 1000;
}

export function buildReport(input: ReportInput): LoadtestReport {
  const { opts, chats, verification: v, timing } = input;
  const all = chats.flatMap((c) => c.messages);
  const acked = all.filter((m) => m.outcome === 'accepted' || m.outcome === 'duplicate').length;
  const commits = chats.flatMap((c) => c.commits);
  const consumed = commits.reduce((s, c) => s + c.consumed, 0);
  const turnTokens = commits.flatMap((c) => (c.tokens ? [c.tokens] : []));
  const tokens = {
    input: turnTokens.reduce((s, t) => s + t.input, 0),
    cachedInput: turnTokens.reduce((s, t) => s + t.cachedInput, 0),
    output: turnTokens.reduce((s, t) => s + t.output, 0),
  };
  const events: Record<string, number> = {};
  for (const c of chats) for (const [k, n] of Object.entries(c.eventCounts)) events[k] = (events[k] ?? 0) + n;

  const outcomes = v.chats.filter((c) => c.acked > 0);
  const completion = outcomes.flatMap((c) => (c.completionMs === undefined ? [] : [c.completionMs]));
  const maxWaits = outcomes.flatMap((c) => (c.maxWaitMs === undefined ? [] : [c.maxWaitMs]));
  const meanWaits = outcomes.flatMap((c) => (c.meanWaitMs === undefined ? [] : [c.meanWaitMs]));
  const worst = outcomes.reduce<(typeof outcomes)[number] | undefined>(
    (w, c) =>
      c.maxWaitMs !== undefined && (w?.maxWaitMs === undefined || c.maxWaitMs > w.maxWaitMs) ? c : w,
    undefined,
  );
  const answered = outcomes.reduce((s, c) => s + c.answered, 0);
  const wallS = timing.finishedAt / 1000;
  const cpuS = (input.cpu.user + input.cpu.system) / 1e6;

  let model: LoadtestReport['model'] = null;
  if (input.modelStats) {
    const count = (s: MockStats | undefined) => Object.values(s?.perChat ?? {}).reduce((a, b) => a + b, 0);
    const requests = count(input.modelStats) - count(input.modelBefore);
    const keys = new Set(chats.map((c) => c.key));
    const overlaps = input.modelStats.violations.filter((o) => keys.has(o.chatKey));
    model = {
      requests,
      requestsPerTurn: r(requests / Math.max(1, commits.length), 2),
      maxInFlightPerChat: Math.max(requests > 0 ? 1 : 0, ...overlaps.map((o) => o.inFlight)),
      overlaps: overlaps.length,
    };
  }

  const ackWindowS =
    timing.firstAckAt !== undefined && timing.lastAckAt !== undefined && timing.lastAckAt > timing.firstAckAt
      ? (timing.lastAckAt - timing.firstAckAt) / 1000
      : timing.sendEndedAt / 1000;
  const ok = input.aborted === undefined && v.invariants.every((i) => i.ok);
  return {
    tool: 'chatlane loadtest',
    ok,
    aborted: input.aborted ?? null,
    startedAt: input.startedAt.toISOString(),
    target: opts.url.href,
    runId: opts.runId,
    settings: {
      mode: opts.mode,
      chats: opts.chats,
      messages: opts.messages,
      ...(opts.mode === 'open'
        ? { rate: opts.rate }
        : { connections: opts.connections, thinkMs: opts.thinkMs }),
      profile: opts.profile,
      bursts: opts.burstShare,
      burstSize: opts.burstSize,
      burstWindowMs: opts.burstWindowMs,
      durationS: opts.durationS,
      drainS: opts.drainS,
      seed: opts.seed,
      textBytes: opts.textBytes,
      retries: opts.retries,
      replies: opts.replies,
      maxStreams: opts.maxStreams,
      pollIntervalMs: opts.pollIntervalMs,
      maxRequests: opts.maxRequests,
      mockUrl: opts.mockUrl?.href ?? null,
      via: opts.via,
      ...(opts.via === 'webhook' && { source: opts.source }),
    },
    schedule: {
      messages: input.schedule.messages,
      steps: input.schedule.steps,
      bursts: input.schedule.bursts,
      lastArrivalS: input.schedule.mode === 'open' ? r(input.schedule.lastArrivalMs / 1000, 2) : null,
    },
    messages: {
      planned: all.length,
      sent: all.filter((m) => m.outcome !== 'unsent').length,
      acked,
      ackedAsDuplicate: input.duplicatesAcked,
      failed: all.filter((m) => m.outcome === 'failed').length,
      notSent: all.filter((m) => m.outcome === 'unsent').length,
      answered,
      withoutReply: v.messagesWithoutReply,
      ...v.fate,
    },
    timing: {
      sendingS: r(timing.sendEndedAt / 1000, 2),
      drainS: r((timing.drainedAt - timing.sendEndedAt) / 1000, 2),
      totalS: r(wallS, 2),
      cutByDuration: timing.cutByDuration,
      drainTimedOut: timing.drainTimedOut,
      maxScheduleLagMs: r(timing.maxScheduleLagMs),
    },
    acks: { perSecond: r(acked / Math.max(ackWindowS, 0.001)), latencyMs: summarize(input.ackMs) },
    replies: {
      perSecond: r(answered / Math.max(timing.drainedAt / 1000, 0.001)),
      perSecondWhileSending: r(steadyRate(v.answeredAt, timing.sendEndedAt / 4, timing.sendEndedAt)),
      latencyMs: summarize(v.e2eMs),
      observedBy: input.watcher.name,
      resolutionMs: r(input.watcher.resolutionMs),
      streams: input.watcher.streams,
    },
    turns: {
      committed: commits.length,
      messagesPerTurn: r(consumed / Math.max(1, commits.length), 2),
      mergedMessages: commits.reduce((s, c) => s + c.merged, 0),
      turnsWithMerges: commits.filter((c) => c.merged > 0).length,
      durationMs: summarize(
        commits.flatMap((c) => (c.ms === undefined ? [] : [c.ms])),
        0,
      ),
      takeovers: chats.reduce((s, c) => s + c.takeovers.length, 0),
      events,
      tokens: {
        ...tokens,
        perTurn: summarize(
          turnTokens.map((t) => t.input + t.output),
          0,
        ),
        cachedShare: tokens.input > 0 ? r(tokens.cachedInput / tokens.input, 3) : null,
      },
    },
    fairness: {
      chatCompletionMs: summarize(completion, 0),
      chatMaxWaitMs: summarize(maxWaits, 0),
      jainIndexOfMeanWait: jainIndex(meanWaits),
      worstChat:
        worst?.maxWaitMs !== undefined ? { chatKey: worst.key, maxWaitMs: r(worst.maxWaitMs, 0) } : null,
    },
    errors: {
      sendsByStatus: input.errors.byStatus,
      sendsByCode: input.errors.byCode,
      pollsByCode: input.errors.pollByCode,
      retries: input.errors.retries,
    },
    model,
    duplicates: v.duplicates,
    bursts:
      opts.profile === 'typing' ? burstReport(input.schedule, chats, v.replySeenAt, model?.requests) : null,
    deliveries:
      input.receiverRejected === undefined
        ? null
        : {
            received: chats.reduce((n, c) => n + c.deliveries.size, 0),
            redeliveries: v.duplicates.redeliveries,
            rejected: input.receiverRejected,
          },
    client: {
      transport: input.transport,
      requests: input.requests,
      cpuS: r(cpuS, 2),
      cpuPctOfOneCore: r((cpuS / Math.max(wallS, 0.001)) * 100),
    },
    invariants: v.invariants,
  };
}

const ms = (v: number) =>
  Number.isFinite(v) ? (v >= 1000 ? `${(v / 1000).toFixed(2)} s` : `${v.toFixed(1)} ms`) : '—';
const counts = (rec: Record<string, number>) =>
  Object.entries(rec)
    .sort((a, b) => b[1] - a[1])
    .map(([k, n]) => `${k} ×${n}`)
    .join(', ');

function latencyLine(s: Summary): string {
  return s.count === 0
    ? 'no samples'
    : `p50 ${ms(s.p50)}   p90 ${ms(s.p90)}   p99 ${ms(s.p99)}   max ${ms(s.max)}   (${s.count})`;
}

export function renderSummary(rep: LoadtestReport): string {
  const s = rep.settings;
  const shape =
    s.mode === 'open'
      ? `open model at ${s.rate} msg/s`
      : `closed loop, ${s.connections} users${Array.isArray(s.thinkMs) && Number(s.thinkMs[1]) > 0 ? `, think ${(s.thinkMs as number[]).join('-')} ms` : ''}`;
  const m = rep.messages;
  const lines = [
    `chatlane loadtest — ${rep.target} — ${shape}, ${s.chats} chats × ${s.messages} messages, ` +
      `${s.profile === 'typing' ? 'typing in bursts' : `bursts ${s.bursts} of ${s.burstSize}`}, seed ${s.seed}, run ${rep.runId}`,
    `  messages   sent ${m.sent}/${m.planned} in ${rep.timing.sendingS} s${rep.timing.cutByDuration ? ' (cut by --duration)' : ''}, ` +
      `acked ${m.acked} (${m.ackedAsDuplicate} as duplicate), failed ${m.failed}, answered ${m.answered}`,
    `  acks       ${rep.acks.perSecond}/s   ${latencyLine(rep.acks.latencyMs)}`,
    `  replies    ${rep.replies.perSecond}/s (${rep.replies.perSecondWhileSending}/s while sending)   ${latencyLine(rep.replies.latencyMs)}`,
    `             send → reply seen (${rep.replies.observedBy}, ±${rep.replies.resolutionMs} ms)` +
      (rep.replies.streams
        ? `; ${rep.replies.streams.opened} streams opened, ${rep.replies.streams.reconnects} resumed, ${rep.replies.streams.chatsPolled} chats polled`
        : ''),
    `  turns      ${rep.turns.committed} committed, ${rep.turns.messagesPerTurn} messages/turn, ` +
      `${rep.turns.mergedMessages} messages merged into ${rep.turns.turnsWithMerges} running turns, ` +
      `turn p50 ${ms(rep.turns.durationMs.p50)} p99 ${ms(rep.turns.durationMs.p99)}` +
      (rep.turns.takeovers > 0 ? `, ${rep.turns.takeovers} lease takeovers` : ''),
    `  fairness   chat completion p50 ${ms(rep.fairness.chatCompletionMs.p50)} p99 ${ms(rep.fairness.chatCompletionMs.p99)} ` +
      `max ${ms(rep.fairness.chatCompletionMs.max)}; worst wait ${rep.fairness.worstChat ? `${ms(rep.fairness.worstChat.maxWaitMs)} (${rep.fairness.worstChat.chatKey})` : '—'}; ` +
      `Jain index ${rep.fairness.jainIndexOfMeanWait}`,
    `  errors     ${Object.keys(rep.errors.sendsByCode).length === 0 ? 'none' : `${counts(rep.errors.sendsByStatus)} — ${counts(rep.errors.sendsByCode)} (${rep.errors.retries} retried)`}` +
      (Object.keys(rep.errors.pollsByCode).length > 0 ? `; polls: ${counts(rep.errors.pollsByCode)}` : ''),
  ];
  const tk = rep.turns.tokens;
  if (tk.perTurn.count > 0) {
    lines.push(
      `  tokens     ${Math.round(tk.perTurn.mean)}/turn (p50 ${tk.perTurn.p50}, p99 ${tk.perTurn.p99}; input + output), ` +
        `input ${tk.input} (${tk.cachedShare === null ? '—' : `${r(tk.cachedShare * 100)} %`} cached), output ${tk.output}`,
    );
  }
  if (rep.model) {
    lines.push(
      `  model      ${rep.model.requests} requests (${rep.model.requestsPerTurn}/turn), most in flight for one chat: ${rep.model.maxInFlightPerChat}`,
    );
  }
  const b = rep.bursts;
  if (b) {
    lines.push(
      `  bursts     ${b.bursts} of ${b.messagesPerBurst} messages: ${b.modelCallsPerBurst ?? '—'} model calls and ` +
        `${r(b.repliesPerBurst.mean, 2)} replies per burst (${b.earlyReplies} before its last message); ` +
        `last message → its reply ${latencyLine(b.lastMessageToReplyMs)}` +
        (b.lastMessageUnanswered > 0 ? `, ${b.lastMessageUnanswered} unanswered` : ''),
    );
  }
  if (rep.deliveries) {
    lines.push(
      `  delivery   ${rep.deliveries.received} replies delivered to replyTo, ${rep.deliveries.redeliveries} redelivered (same id), ${rep.deliveries.rejected} refused by the receiver`,
    );
  }
  if (
    rep.duplicates.uncommittedReplies > 0 ||
    rep.duplicates.repeatedTexts > 0 ||
    rep.duplicates.answeredTwice > 0
  ) {
    lines.push(
      `  duplicates ${rep.duplicates.answeredTwice} messages answered twice, ${rep.duplicates.uncommittedReplies} replies from turns that never committed, ${rep.duplicates.repeatedTexts} repeated reply texts`,
    );
  }
  lines.push(
    `  client     ${rep.client.requests} requests, ${rep.client.cpuS} s CPU (${rep.client.cpuPctOfOneCore} % of one core)`,
    'checks',
  );
  for (const inv of rep.invariants) {
    const mark = inv.skipped ? 'skip' : inv.ok ? ' ok ' : 'FAIL';
    lines.push(
      `  [${mark}] ${inv.description}${inv.violations > 0 ? ` — ${inv.violations} violation(s)` : ''}`,
    );
    for (const ex of inv.examples.slice(0, 5)) lines.push(`         ${ex}`);
  }
  if (rep.aborted) lines.push(`aborted: ${rep.aborted}`);
  const failed = rep.invariants.filter((i) => !i.ok).length;
  lines.push(
    rep.ok ? 'PASS' : `FAIL${failed > 0 ? ` (${failed} check${failed > 1 ? 's' : ''} failed)` : ''}`,
  );
  return lines.join('\n');
}

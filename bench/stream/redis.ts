import { randomBytes } from 'node:crypto';
import { Redis } from 'ioredis';
import { replyStreamKey } from '../../src/shared/keys.js';
import { scripts } from '../../src/shared/store/scripts.js';
import { inBatches, progress, round, sleep } from '../lib/util.js';
import { clock, uiTurn } from './client.js';
import { API_TOKEN, committedChats, countingProxy, type OwnRedis, startStack, webTokens } from './stack.js';

/**
 * Redis commands and bytes per streamed reply, on the benchmark's own redis-server: each role
 * reaches Redis through a byte-counting proxy of its own (bytes each way), and MONITOR names
 * the client of every command (the proxy's upstream port tells the role). Two phases of the
 * same turns: through `POST /v1/chats/:chatKey/messages` (the worker still writes the reply
 * stream, nobody reads it) and through `POST /v1/ui` (an ingress follows it to the client).
 * What the processes do while idle (BullMQ's and the hub's polling), measured over a quiet
 * window first, is subtracted per second of each phase.
 */

interface Side {
  commands: number;
  toRedis: number;
  fromRedis: number;
}

interface Tally {
  worker: Side;
  ingress: Side;
  /** Commands run inside scripts (MONITOR's `lua` source), either role's. */
  inScripts: number;
  /** reply-write.lua calls and the bytes of their arguments. */
  replyWriteCalls: number;
  replyWriteArgBytes: number;
  /** reply-append-many.lua calls, the replies they appended to, and the bytes of their arguments. */
  appendManyCalls: number;
  appendManyReplies: number;
  appendManyArgBytes: number;
}

function emptyTally(): Tally {
  return {
    worker: { commands: 0, toRedis: 0, fromRedis: 0 },
    ingress: { commands: 0, toRedis: 0, fromRedis: 0 },
    inScripts: 0,
    replyWriteCalls: 0,
    replyWriteArgBytes: 0,
    appendManyCalls: 0,
    appendManyReplies: 0,
    appendManyArgBytes: 0,
  };
}

export interface PhaseCost {
  replies: number;
  seconds: number;
  perReply: {
    workerCommands: number;
    workerBytesToRedis: number;
    workerBytesFromRedis: number;
    ingressCommands: number;
    ingressBytesToRedis: number;
    ingressBytesFromRedis: number;
    commands: number;
    bytes: number;
    commandsInScripts: number;
    replyWriteCalls: number;
    replyWriteArgBytes: number;
    /** reply-append-many.lua calls a reply's share (a call carries the appends of many replies). */
    appendManyCalls: number;
    /** Appends of this reply that went in such calls. */
    appendsInMany: number;
    appendManyArgBytes: number;
  };
}

export interface RedisCost {
  replies: number;
  chunkMs: number;
  /** Idle traffic per second, subtracted from each phase. */
  idlePerSecond: { commands: number; bytes: number };
  api: PhaseCost;
  ui: PhaseCost;
  /** The reply streams of the ui phase: entries and MEMORY USAGE, per reply. */
  replyStream: { entries: number; memoryBytes: number };
  clientChunksPerReply: number;
}

export async function measureRedisCost(
  redis: OwnRedis,
  o: {
    replies: number;
    chunkMs: number;
    latencyMs: [number, number];
    text: string;
    timeoutMs: number;
    label: string;
  },
): Promise<RedisCost> {
  const ingressProxy = await countingProxy(redis.port);
  const workerProxy = await countingProxy(redis.port);
  const stack = await startStack({
    redisUrl: redis.url,
    ingressRedisUrl: ingressProxy.url,
    workerRedisUrl: workerProxy.url,
    ingresses: 1,
    workers: 1,
    workerConcurrency: o.replies + 50,
    latencyMs: o.latencyMs,
    chunkMs: o.chunkMs,
  });
  const monitorBase = new Redis({ port: redis.port, host: '127.0.0.1' });
  const monitor = await monitorBase.monitor();
  const ingressUrl = stack.ingresses[0]!.url!;
  let tally = emptyTally();
  monitor.on('monitor', (_time: string, args: string[], source: string) => {
    if (source === 'lua') {
      tally.inScripts++;
      return;
    }
    const port = Number(source.split(':').at(-1));
    const side = workerProxy.upstreamPorts.has(port)
      ? tally.worker
      : ingressProxy.upstreamPorts.has(port)
        ? tally.ingress
        : undefined;
    if (!side) return; // this benchmark's own admin and MONITOR connections
    side.commands++;
    if (args[0]?.toLowerCase() !== 'evalsha') return;
    const argBytes = () => args.reduce((n, a) => n + Buffer.byteLength(a), 0);
    if (args[1] === scripts.replyWrite.sha) {
      tally.replyWriteCalls++;
      tally.replyWriteArgBytes += argBytes();
    } else if (args[1] === scripts.replyAppendMany.sha) {
      tally.appendManyCalls++;
      // Two keys a reply: its chat's meta, its stream.
      tally.appendManyReplies += Number(args[2]) / 2;
      tally.appendManyArgBytes += argBytes();
    }
  });
  const snapshot = () => {
    const w = workerProxy.counts();
    const i = ingressProxy.counts();
    tally.worker.toRedis = w.toRedis;
    tally.worker.fromRedis = w.fromRedis;
    tally.ingress.toRedis = i.toRedis;
    tally.ingress.fromRedis = i.fromRedis;
    return structuredClone(tally);
  };
  const window = async (run: () => Promise<void>) => {
    tally = emptyTally();
    const before = snapshot();
    const t0 = clock();
    await run();
    const after = snapshot();
    const seconds = (clock() - t0) / 1000;
    const diff = (a: Side, b: Side): Side => ({
      commands: a.commands, // reset per window: counted from zero
      toRedis: a.toRedis - b.toRedis,
      fromRedis: a.fromRedis - b.fromRedis,
    });
    return {
      seconds,
      worker: diff(after.worker, before.worker),
      ingress: diff(after.ingress, before.ingress),
      inScripts: after.inScripts,
      replyWriteCalls: after.replyWriteCalls,
      replyWriteArgBytes: after.replyWriteArgBytes,
      appendManyCalls: after.appendManyCalls,
      appendManyReplies: after.appendManyReplies,
      appendManyArgBytes: after.appendManyArgBytes,
    };
  };

  try {
    const uiRound = async (keys: string[]) => {
      const tokens = await webTokens(keys);
      const turns = await Promise.all(
        keys.map((k) => uiTurn(ingressUrl, k, tokens.get(k)!, `m-${k}`, o.text).result),
      );
      const bad = turns.filter((t) => !t.done || t.text !== `echo: ${o.text}`);
      if (bad.length > 0) throw new Error(`${o.label}: ${bad.length} replies incomplete: ${bad[0]!.error}`);
      return turns;
    };
    const warm = Array.from({ length: 10 }, (_, i) => `${stack.prefix}-cw-${i}`);
    await uiRound(warm);
    await sleep(1000);

    const idle = await window(() => sleep(3000));
    const idleRate = (s: Side) => ({
      commands: s.commands / idle.seconds,
      toRedis: s.toRedis / idle.seconds,
      fromRedis: s.fromRedis / idle.seconds,
    });
    const idleWorker = idleRate(idle.worker);
    const idleIngress = idleRate(idle.ingress);

    const net = (w: Awaited<ReturnType<typeof window>>, replies: number): PhaseCost => {
      const per = (v: number, idlePerS: number) => round((v - idlePerS * w.seconds) / replies, 1);
      const perReply = {
        workerCommands: per(w.worker.commands, idleWorker.commands),
        workerBytesToRedis: per(w.worker.toRedis, idleWorker.toRedis),
        workerBytesFromRedis: per(w.worker.fromRedis, idleWorker.fromRedis),
        ingressCommands: per(w.ingress.commands, idleIngress.commands),
        ingressBytesToRedis: per(w.ingress.toRedis, idleIngress.toRedis),
        ingressBytesFromRedis: per(w.ingress.fromRedis, idleIngress.fromRedis),
        commands: 0,
        bytes: 0,
        commandsInScripts: round(w.inScripts / replies, 1),
        replyWriteCalls: round(w.replyWriteCalls / replies, 2),
        replyWriteArgBytes: round(w.replyWriteArgBytes / replies, 1),
        appendManyCalls: round(w.appendManyCalls / replies, 2),
        appendsInMany: round(w.appendManyReplies / replies, 2),
        appendManyArgBytes: round(w.appendManyArgBytes / replies, 1),
      };
      perReply.commands = round(perReply.workerCommands + perReply.ingressCommands, 1);
      perReply.bytes = round(
        perReply.workerBytesToRedis +
          perReply.workerBytesFromRedis +
          perReply.ingressBytesToRedis +
          perReply.ingressBytesFromRedis,
        1,
      );
      return { replies, seconds: round(w.seconds), perReply };
    };

    const tag = `${stack.prefix}-c${randomBytes(3).toString('hex')}`;
    const apiKeys = Array.from({ length: o.replies }, (_, i) => `${tag}-api-${i}`);
    const api = await window(async () => {
      await inBatches(apiKeys, o.replies, async (k) => {
        const res = await fetch(`${ingressUrl}/v1/chats/${k}/messages`, {
          method: 'POST',
          headers: { 'content-type': 'application/json', authorization: `Bearer ${API_TOKEN}` },
          body: JSON.stringify({ id: `m-${k}`, text: o.text }),
        });
        if (res.status !== 202)
          throw new Error(`${o.label}: POST messages → ${res.status} ${await res.text()}`);
      });
      const deadline = Date.now() + o.timeoutMs;
      while ((await committedChats(redis.admin, stack.prefix, apiKeys)) < apiKeys.length) {
        if (Date.now() > deadline) throw new Error(`${o.label}: api turns not committed in time`);
        await sleep(100);
      }
    });
    await sleep(1000);

    const uiKeys = Array.from({ length: o.replies }, (_, i) => `${tag}-ui-${i}`);
    let chunks = 0;
    const ui = await window(async () => {
      const turns = await uiRound(uiKeys);
      chunks = turns.reduce((n, t) => n + t.chunks, 0);
    });

    let entries = 0;
    let memory = 0;
    for (const k of uiKeys) {
      const [key] = await scanAll(redis.admin, replyStreamKey(stack.prefix, k, '*'));
      if (!key) throw new Error(`${o.label}: no reply stream for ${k}`);
      entries += await redis.admin.xlen(key);
      memory += Number(await redis.admin.call('MEMORY', 'USAGE', key, 'SAMPLES', '0'));
    }
    const result: RedisCost = {
      replies: o.replies,
      chunkMs: o.chunkMs,
      idlePerSecond: {
        commands: round(idleWorker.commands + idleIngress.commands, 1),
        bytes: round(
          idleWorker.toRedis + idleWorker.fromRedis + idleIngress.toRedis + idleIngress.fromRedis,
          1,
        ),
      },
      api: net(api, o.replies),
      ui: net(ui, o.replies),
      replyStream: { entries: round(entries / o.replies, 1), memoryBytes: Math.round(memory / o.replies) },
      clientChunksPerReply: round(chunks / o.replies, 1),
    };
    progress(
      `${o.label}: per reply via /v1/ui ${result.ui.perReply.commands} commands, ${result.ui.perReply.bytes} B ` +
        `(worker ${result.ui.perReply.workerCommands} / ingress ${result.ui.perReply.ingressCommands}); ` +
        `via messages API ${result.api.perReply.commands} commands, ${result.api.perReply.bytes} B; ` +
        `reply-write ${result.ui.perReply.replyWriteCalls} calls, ${result.ui.perReply.replyWriteArgBytes} B; ` +
        `${result.ui.perReply.appendsInMany} appends in ${result.ui.perReply.appendManyCalls} reply-append-many ` +
        `calls, ${result.ui.perReply.appendManyArgBytes} B`,
    );
    return result;
  } finally {
    monitor.disconnect();
    monitorBase.disconnect();
    await stack.stop();
    await ingressProxy.close();
    await workerProxy.close();
  }
}

async function scanAll(redis: Redis, pattern: string): Promise<string[]> {
  const out: string[] = [];
  let cursor = '0';
  do {
    const [next, keys] = await redis.scan(cursor, 'MATCH', pattern, 'COUNT', 1000);
    cursor = next;
    out.push(...keys);
  } while (cursor !== '0');
  return out;
}

import { randomBytes } from 'node:crypto';
import { inBatches, progress, round, sleep } from '../lib/util.js';
import { type UiTurnHandle, uiTurn } from './client.js';
import { warmUp } from './latency.js';
import { processMemory, startStack, webTokens } from './stack.js';

/**
 * Ingress memory per open `/v1/ui` stream: K conversations on one ingress whose turns have
 * opened their replies and then wait on the model (its latency set to 10 minutes once the
 * warm-up is done), so every response follows an open reply and receives nothing more.
 * RSS and V8 heap used from the ingress's `/metrics`, each the least of ~2 s of samples
 * (heap used includes garbage until the next GC), before and after the K streams.
 */

export interface IngressMemory {
  streams: number;
  /** Responses that received their reply's `start` chunk (following an open reply). */
  following: number;
  rssBytesPerStream: number;
  heapBytesPerStream: number;
  before: { rssMb: number; heapMb: number };
  after: { rssMb: number; heapMb: number };
}

async function settled(base: string): Promise<{ rss: number; heap: number }> {
  let rss = Number.POSITIVE_INFINITY;
  let heap = Number.POSITIVE_INFINITY;
  for (let i = 0; i < 8; i++) {
    const m = await processMemory(base);
    rss = Math.min(rss, m.rss);
    heap = Math.min(heap, m.heap);
    await sleep(250);
  }
  return { rss, heap };
}

export async function measureIngressMemory(
  redisUrl: string,
  o: { streams: number; text: string; timeoutMs: number; label: string },
): Promise<IngressMemory> {
  const stack = await startStack({
    redisUrl,
    ingresses: 1,
    workers: 1,
    workerConcurrency: o.streams + 50,
    latencyMs: [0, 0],
    chunkMs: 0,
    env: { SSE_HEARTBEAT_MS: '2000' },
  });
  const handles: UiTurnHandle[] = [];
  try {
    const base = stack.ingresses[0]!.url!;
    await warmUp(stack, 20, o.text);
    const m0 = await settled(base);
    await stack.control({ latencyMs: [600_000, 600_000] });
    const keys = Array.from(
      { length: o.streams },
      (_, i) => `${stack.prefix}-mem-${randomBytes(3).toString('hex')}-${i}`,
    );
    const tokens = await webTokens(keys);
    // In batches: a thousand handshakes at once would measure the accept queue, not the streams.
    await inBatches(keys, 100, async (k) => {
      const h = uiTurn(base, k, tokens.get(k)!, `m-${k}`, o.text);
      handles.push(h);
      await Promise.race([h.started, sleep(o.timeoutMs)]);
    });
    // A few heartbeats go by: memory that grows per heartbeat would show.
    await sleep(5000);
    const m1 = await settled(base);
    const following = handles.filter(
      (h) => h.turn.startAt !== undefined && !h.turn.done && !h.turn.error,
    ).length;
    const mb = (b: number) => round(b / 1024 / 1024, 1);
    const result: IngressMemory = {
      streams: o.streams,
      following,
      rssBytesPerStream: Math.round((m1.rss - m0.rss) / o.streams),
      heapBytesPerStream: Math.round((m1.heap - m0.heap) / o.streams),
      before: { rssMb: mb(m0.rss), heapMb: mb(m0.heap) },
      after: { rssMb: mb(m1.rss), heapMb: mb(m1.heap) },
    };
    progress(
      `${o.label}: ${o.streams} open streams: RSS +${round(result.rssBytesPerStream / 1024, 1)} KiB, ` +
        `heap +${round(result.heapBytesPerStream / 1024, 1)} KiB per stream`,
    );
    return result;
  } finally {
    for (const h of handles) h.cancel();
    await stack.stop();
  }
}

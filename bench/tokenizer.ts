import { clearMergeCache, countTokens } from 'gpt-tokenizer';
import { clearMergeCache as clearCountCache } from '../src/shared/bpe-count.js';
import type { ChatMessage } from '../src/shared/messages.js';
import {
  countTextTokens,
  countTextTokensAsync,
  TOKENIZER_SLICE_CHARS,
  TOKENIZER_YIELD_BYTES,
  withTokens,
} from '../src/shared/tokens.js';
import { hostileTexts } from '../test/helpers/hostile-text.js';
import { median, progress, round } from './lib/util.js';

/**
 * Token counting on hostile text: the cost per KB of each pathological shape, against the
 * anchor of ordinary English prose in the same run, and the longest the event loop is held
 * while one huge message is counted. `before` is gpt-tokenizer handed the whole text at once
 * (what chatlane did): its cost per KB grows with the length, which is the quadratic blow-up.
 */

export interface TokenizerOptions {
  runs: number;
  /** Size of the text measured per shape, in characters. */
  chars: number;
  /** Sizes at which the whole-text `before` is measured (it is quadratic: keep them small). */
  beforeChars: number[];
  /** MAX_CHARS_PER_MESSAGE for the per-message measurement. */
  maxCharsPerMessage: number;
}

export const TOKENIZER_DEFAULTS: TokenizerOptions = {
  runs: 3,
  chars: 100_000,
  beforeChars: [2000, 4000, 8000],
  maxCharsPerMessage: 4000,
};

const kb = (text: string) => Buffer.byteLength(text, 'utf8') / 1024;

/**
 * Empties the merge caches (gpt-tokenizer's for `before`, chatlane's own for the rest), so
 * nothing measured is a cache hit from an earlier call.
 */
function clearCaches(): void {
  clearMergeCache();
  clearCountCache();
}

/**
 * CPU µs of `fn` (user + system of this process): on a shared box a neighbour can take the
 * core mid-measurement, which wall time counts and CPU time does not. Caches cleared first.
 */
function cpuUs(fn: () => unknown): number {
  clearCaches();
  const t0 = process.cpuUsage();
  fn();
  const d = process.cpuUsage(t0);
  return d.user + d.system;
}

/**
 * Longest stretch without an event-loop turn while `work` runs, from an immediate that
 * re-arms itself: in wall time (what other chats' turns feel; on a loaded box it includes
 * time the process was not scheduled) and in CPU time of the process (immune to that, but
 * it includes V8's background GC threads).
 */
async function longestBlock(work: () => Promise<unknown>): Promise<{ wallMs: number; cpuMs: number }> {
  const cpuMs = () => {
    const u = process.cpuUsage();
    return (u.user + u.system) / 1000;
  };
  let lastWall = performance.now();
  let lastCpu = cpuMs();
  const longest = { wallMs: 0, cpuMs: 0 };
  let running = true;
  const mark = () => {
    const wall = performance.now();
    const cpu = cpuMs();
    longest.wallMs = Math.max(longest.wallMs, wall - lastWall);
    longest.cpuMs = Math.max(longest.cpuMs, cpu - lastCpu);
    lastWall = wall;
    lastCpu = cpu;
  };
  const tick = () => {
    mark();
    if (running) setImmediate(tick);
  };
  setImmediate(tick);
  await work();
  running = false;
  mark();
  return longest;
}

const message = (text: string): ChatMessage => ({
  id: 'm',
  role: 'user',
  parts: [{ type: 'text', text }],
  metadata: { ts: 1, chatKey: 'bench', kind: 'normal' },
});

interface ShapeRun {
  usPerKB: number;
  /** CPU µs of withTokens on a message of this text (cut to maxCharsPerMessage, as the worker counts it). */
  perMessageUs: number;
  /** Longest event-loop block (wall ms) while the whole text is counted asynchronously. */
  asyncLongestBlockMs: number;
  /** The same in CPU ms of the process. */
  asyncLongestBlockCpuMs: number;
}

export async function benchTokenizer(opts: TokenizerOptions) {
  const texts = hostileTexts(opts.chars);
  const perShape: Record<string, ShapeRun[]> = {};
  for (let run = 0; run < opts.runs; run++) {
    progress(`tokenizer: run ${run + 1}/${opts.runs}`);
    for (const [name, text] of Object.entries(texts)) {
      // Warm the tokenizer (rank tables, JIT) on a different text of the same shape.
      countTextTokens(hostileTexts(2000, 100 + run)[name]!);
      const usPerKB = cpuUs(() => countTextTokens(text)) / kb(text);
      const perMessage: number[] = [];
      for (let rep = 0; rep < 5; rep++) {
        clearCaches();
        const t0 = process.cpuUsage();
        await withTokens(message(text), opts.maxCharsPerMessage);
        const d = process.cpuUsage(t0);
        perMessage.push(d.user + d.system);
      }
      const perMessageUs = median(perMessage);
      clearCaches();
      const block = await longestBlock(() => countTextTokensAsync(text));
      perShape[name] = [
        ...(perShape[name] ?? []),
        { usPerKB, perMessageUs, asyncLongestBlockMs: block.wallMs, asyncLongestBlockCpuMs: block.cpuMs },
      ];
    }
  }

  // Before: the whole text in one call. Its µs/KB rising with the size is the quadratic term.
  const before: Record<string, Record<string, number>> = {};
  for (const [name] of Object.entries(texts)) {
    before[name] = {};
    for (const chars of opts.beforeChars) {
      const text = hostileTexts(chars, 7)[name]!;
      before[name]![`${chars}chars`] = round(
        median(
          Array.from({ length: opts.runs }, () =>
            cpuUs(() => countTokens(text, { disallowedSpecial: new Set() })),
          ),
        ) / kb(text),
        1,
      );
    }
  }

  const medians = Object.fromEntries(
    Object.entries(perShape).map(([name, runs]) => [
      name,
      {
        usPerKB: round(median(runs.map((r) => r.usPerKB)), 1),
        perMessageUs: round(median(runs.map((r) => r.perMessageUs)), 0),
        asyncLongestBlockMs: round(median(runs.map((r) => r.asyncLongestBlockMs)), 2),
        asyncLongestBlockCpuMs: round(median(runs.map((r) => r.asyncLongestBlockCpuMs)), 2),
      },
    ]),
  );
  const anchor = medians.englishProse!.usPerKB;
  const pathologicalNames = Object.keys(medians).filter((n) => n !== 'englishProse');
  const worst = pathologicalNames.reduce((a, b) => (medians[a]!.usPerKB >= medians[b]!.usPerKB ? a : b));
  const worstMessage = pathologicalNames.reduce((a, b) =>
    medians[a]!.perMessageUs >= medians[b]!.perMessageUs ? a : b,
  );
  return {
    description:
      `countTextTokens on ${opts.chars.toLocaleString('en')} characters of each shape (CPU µs per KB of UTF-8, merge cache emptied first), ` +
      `withTokens on a message of that text cut to MAX_CHARS_PER_MESSAGE=${opts.maxCharsPerMessage} ` +
      '(what a worker does per message), and the longest event-loop block while countTextTokensAsync ' +
      'counts the whole text. Anchor: English prose in the same run. before: gpt-tokenizer on the whole ' +
      'text in one call, CPU µs/KB at growing sizes (quadratic: the per-KB cost grows with the size). ' +
      'asyncLongestBlockMs / asyncLongestBlockCpuMs: the longest stretch between two event-loop turns, wall and process CPU.',
    settings: { ...opts, sliceChars: TOKENIZER_SLICE_CHARS, yieldBytes: TOKENIZER_YIELD_BYTES },
    anchorUsPerKB: anchor,
    shapes: medians,
    worstShape: worst,
    worstUsPerKB: medians[worst]!.usPerKB,
    worstRatioToProse: round(medians[worst]!.usPerKB / anchor, 2),
    worstMessageShape: worstMessage,
    worstMessageUs: medians[worstMessage]!.perMessageUs,
    worstAsyncBlockMs: Math.max(...pathologicalNames.map((n) => medians[n]!.asyncLongestBlockMs)),
    before,
    runs: perShape,
  };
}

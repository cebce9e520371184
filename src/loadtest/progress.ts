import type { LiveCounters } from './run.js';
import { percentileOfSorted } from './stats.js';

/**
 * The live progress line: rewritten in place on a terminal, a plain line every few seconds
 * otherwise (CI logs, pipes). Always on stderr: stdout carries the summary or the JSON.
 */

const PLAIN_EVERY_MS = 5000;

function p99(values: number[]): string {
  if (values.length === 0) return '—';
  const sorted = Float64Array.from(values).sort();
  const v = percentileOfSorted(sorted, 99);
  return v >= 1000 ? `${(v / 1000).toFixed(2)} s` : `${Math.round(v)} ms`;
}

export function progressPrinter(
  mode: 'tty' | 'plain' | 'off',
  out: NodeJS.WriteStream | { write(s: string): boolean; isTTY?: boolean } = process.stderr,
): ((live: LiveCounters) => void) | undefined {
  if (mode === 'off') return undefined;
  let lastPlain = -Infinity;
  let lastAcked = 0;
  let lastAt = 0;
  let rate = 0;
  return (live) => {
    const dt = (live.elapsedMs - lastAt) / 1000;
    if (dt > 0) rate = (live.acked - lastAcked) / dt;
    lastAcked = live.acked;
    lastAt = live.elapsedMs;
    const line =
      `${(live.elapsedMs / 1000).toFixed(0).padStart(4)} s ${live.phase.padEnd(9)} ` +
      `sent ${live.sent}/${live.planned}  acked ${live.acked}  answered ${live.answered}  ` +
      `${rate.toFixed(0)} acks/s  ack p99 ${p99(live.recentAckMs)}  reply p99 ~${p99(live.recentAnswerMs)}` +
      (live.errors > 0 ? `  errors ${live.errors}` : '') +
      (live.failed > 0 ? `  failed ${live.failed}` : '');
    if (mode === 'tty') {
      out.write(`\r\x1b[2K${line}${live.phase === 'done' ? '\n' : ''}`);
    } else if (live.phase === 'done' || live.elapsedMs - lastPlain >= PLAIN_EVERY_MS) {
      lastPlain = live.elapsedMs;
      out.write(`loadtest: ${line.trim()}\n`);
    }
  };
}

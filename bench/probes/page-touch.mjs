// `node bench/probes/page-touch.mjs`: what touching memory again after a pause costs a process on this
// machine, as JSON. It writes one byte in each 4 KiB page of a 64 MiB buffer, sleeps, writes
// them again and times that second pass (wall and the process's user + system CPU), for each
// pause several times. Where pages stay mapped the pass should cost the same after any pause
// (not measured elsewhere); on the benchmarks' VM it grows with the pause (docs/benchmarks.md, "Streamed
// replies"), so a process that works in bursts with pauses between them is charged for the
// pages each burst touches, whatever work it does there.
import { median, round1 } from './probe-stats.mjs';

const PAGE = 4096;
const buffer = Buffer.alloc(64 * 1024 * 1024);
const pauses = [0, 100, 1000, 3000, 10_000];
const repeats = 3;

function touch() {
  const cpu0 = process.cpuUsage();
  const t0 = performance.now();
  for (let i = 0; i < buffer.length; i += PAGE) buffer[i] = (buffer[i] + 1) & 0xff;
  const cpu = process.cpuUsage(cpu0);
  return { wallMs: performance.now() - t0, cpuMs: (cpu.user + cpu.system) / 1000 };
}

touch();
const results = [];
for (const pauseMs of pauses) {
  const passes = [];
  for (let r = 0; r < repeats; r++) {
    touch();
    await new Promise((resolve) => setTimeout(resolve, pauseMs));
    passes.push(touch());
  }
  results.push({
    pauseMs,
    wallMs: round1(median(passes.map((p) => p.wallMs))),
    cpuMs: round1(median(passes.map((p) => p.cpuMs))),
    cpuUsPerPage: round1((median(passes.map((p) => p.cpuMs)) * 1000) / (buffer.length / PAGE)),
  });
}
process.stdout.write(`${JSON.stringify({ pages: buffer.length / PAGE, repeats, results }, null, 2)}\n`);

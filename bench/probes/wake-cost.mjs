// `node bench/probes/wake-cost.mjs`: what one event-loop wake-up costs a process on this machine, as
// JSON. Each iteration sleeps (a timer of `sleepMs`; 0 = setImmediate, which never leaves the
// loop), then does the same small piece of work over a working set (objects read and a counter
// written, spread over `workingSetKiB`). The process's user + system CPU per iteration, less the
// no-sleep iteration's, is what waking after that sleep costs. Where an idle core charges
// nothing for it, the rows should differ by a few microseconds (no such machine measured); on
// the benchmarks' VM the cost grows with the sleep, and a little with the working set (docs/benchmarks.md, "Streamed replies"): a
// process that waits on many small replies pays it for each one that arrives while it sleeps.
import { median, round1 } from './probe-stats.mjs';

const sleeps = [0, 1, 2, 5, 10];
const workingSetsKiB = [64, 4096];
// WAKE_COST_ITERATIONS only proves the script works (test/e2e/bench-probes.test.ts): never a figure.
const fixed = Number(process.env.WAKE_COST_ITERATIONS ?? 0);
const iterations = (sleepMs) => fixed || (sleepMs <= 2 ? 2000 : 600);
const repeats = 3;

/** About `kib` KiB of small objects, and a function that reads and writes 256 of them spread over all. */
function workingSet(kib) {
  const objects = Array.from({ length: Math.max(1, (kib * 1024) / 64) }, (_, i) => ({ i, n: 0, s: `x${i}` }));
  const stride = Math.max(1, Math.floor(objects.length / 256));
  return () => {
    let sum = 0;
    for (let j = 0; j < objects.length; j += stride) {
      const o = objects[j];
      o.n++;
      sum += o.i + o.s.length;
    }
    return sum;
  };
}

const wait = (ms) => new Promise((resolve) => (ms === 0 ? setImmediate(resolve) : setTimeout(resolve, ms)));

async function run(sleepMs, work) {
  const n = iterations(sleepMs);
  const cpu0 = process.cpuUsage();
  for (let i = 0; i < n; i++) {
    await wait(sleepMs);
    work();
  }
  const cpu = process.cpuUsage(cpu0);
  return { total: (cpu.user + cpu.system) / n, user: cpu.user / n, system: cpu.system / n };
}

const results = [];
for (const kib of workingSetsKiB) {
  const work = workingSet(kib);
  for (let i = 0; i < 5000; i++) work();
  const rows = [];
  for (const sleepMs of sleeps) {
    const runs = [];
    for (let r = 0; r < repeats; r++) runs.push(await run(sleepMs, work));
    rows.push({
      sleepMs,
      cpuUsPerWake: round1(median(runs.map((x) => x.total))),
      userUs: round1(median(runs.map((x) => x.user))),
      systemUs: round1(median(runs.map((x) => x.system))),
    });
  }
  const base = rows[0].cpuUsPerWake;
  for (const row of rows) row.overNoSleepUs = round1(row.cpuUsPerWake - base);
  results.push({ workingSetKiB: kib, rows });
}
process.stdout.write(
  `${JSON.stringify({ repeats, iterations: sleeps.map(iterations), results }, null, 2)}\n`,
);

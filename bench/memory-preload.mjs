// Preloaded (`node --import`) into a process that bench/memory-probe.ts measures. On SIGWINCH
// it writes what it collected to `${MEMORY_PROBE_OUT}.<pid>.<n>.json` and starts over.
// (SIGWINCH because SIGUSR2 is the worker's shutdown signal, via close-with-grace.)
//
// MEMORY_PROBE=promoted: V8's sampling heap profiler (8 KiB interval) keeping the samples of
//   objects that survived a scavenge — alive at the end or collected later by a major GC —
//   and dropping those that died young: where the promoted bytes were allocated.
// MEMORY_PROBE=allocated: the same, keeping every sample: where all bytes were allocated (what
//   the young generation's scavenges, most of the GC time, have to go through).
// MEMORY_PROBE=gc: process memory and the old space, sampled every 100 ms and at the end of
//   every major GC: how far the old generation grows between two major GCs.
import { readFileSync, writeFileSync } from 'node:fs';
import { Session } from 'node:inspector/promises';
import { PerformanceObserver } from 'node:perf_hooks';
import v8 from 'node:v8';

const mode = process.env.MEMORY_PROBE;
const out = process.env.MEMORY_PROBE_OUT ?? '/tmp/memory-probe';
let dumps = 0;
const write = (data) => writeFileSync(`${out}.${process.pid}.${++dumps}.json`, JSON.stringify(data));

if (mode === 'promoted' || mode === 'allocated') {
  const session = new Session();
  session.connect();
  await session.post('HeapProfiler.enable');
  const start = () =>
    session.post('HeapProfiler.startSampling', {
      samplingInterval: 8192,
      includeObjectsCollectedByMajorGC: true,
      includeObjectsCollectedByMinorGC: mode === 'allocated',
    });
  await start();
  process.on('SIGWINCH', async () => {
    const { profile } = await session.post('HeapProfiler.stopSampling');
    write(profile);
    await start();
  });
} else if (mode === 'gc') {
  const MB = 1024 * 1024;
  let samples = [];
  const t0 = Date.now();
  const sample = (at) => {
    const mem = process.memoryUsage();
    const old = v8.getHeapSpaceStatistics().find((s) => s.space_name === 'old_space');
    const rssAnonKb = Number(/RssAnon:\s+(\d+)/.exec(readFileSync('/proc/self/status', 'utf8'))?.[1] ?? 0);
    samples.push({
      at,
      ms: Date.now() - t0,
      rssMb: Math.round(mem.rss / MB),
      rssAnonMb: Math.round(rssAnonKb / 1024),
      heapTotalMb: Math.round(mem.heapTotal / MB),
      heapUsedMb: Math.round(mem.heapUsed / MB),
      externalMb: Math.round(mem.external / MB),
      arrayBuffersMb: Math.round(mem.arrayBuffers / MB),
      oldSpaceMb: Math.round((old?.space_size ?? 0) / MB),
      oldUsedMb: Math.round((old?.space_used_size ?? 0) / MB),
    });
  };
  setInterval(() => sample('timer'), 100).unref();
  // kind 4 = major GC (mark-compact).
  new PerformanceObserver((list) => {
    for (const e of list.getEntries()) if (e.detail?.kind === 4) sample('major-gc');
  }).observe({ entryTypes: ['gc'] });
  process.on('SIGWINCH', () => {
    write(samples);
    samples = [];
  });
}

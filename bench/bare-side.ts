import { createInterface } from 'node:readline';
import { ANCHOR_LABEL, idleCpuPct, memoryOf, rssSampler, spawnBareLoop } from './fleet.js';
import { processCpuSeconds, randomPrefix, round, sleep } from './util.js';

/** What one side of a worker-against-anchor benchmark spent on its turns. */
export interface Side {
  turns: number;
  modelCalls: number;
  seconds: number;
  cpuS: number;
  cpuMsPerTurn: number;
  idleRssMb: number;
  /** CPU over 3 s idle after the warm-up, % of a core: timers and polls a turn never asked for. */
  idleCpuPct: number;
  peakRssMb: number;
  /**
   * Most model calls the mock saw open at once (sampled every 200 ms): the concurrency a
   * side actually reached. On a loaded machine it falls short of the level, and unevenly
   * between the sides, which moves the RSS ratio: read the two together.
   */
  peakInFlight: number;
}

export interface BareRun {
  mockUrl: string;
  concurrency: number;
  turns: number;
  warmup: number;
  timeoutMs: number;
  /** The mock's request count and open calls for chats whose key starts with `prefix`. */
  statsOf: (prefix: string) => Promise<{ requests: number; inFlight: number }>;
  /** Every turn's user message (default: the overhead benchmark's `message 0 of <chatKey>`). */
  text?: string;
  /** CPU and heap profiles of the bare loop go here. */
  profileDir?: string;
  /**
   * How long after its last turn the process's CPU is still counted: V8 finishes a burst's
   * garbage collection in the seconds after it (the stream benchmark counts them on both sides).
   */
  settleMs?: number;
}

/**
 * The anchor side of the benchmarks that weigh a worker against the bare AI SDK loop
 * (overhead, stream): `bench/bare-loop.mjs` as its own process, `turns` turns with
 * `concurrency` at once after `warmup` turns, and what /proc says it spent and held.
 */
export async function measureBare(run: BareRun): Promise<Side> {
  const { mockUrl, concurrency, turns, warmup, timeoutMs, statsOf, profileDir } = run;
  const prefix = randomPrefix(ANCHOR_LABEL);
  const profile = profileDir
    ? ['--cpu-prof', `--cpu-prof-dir=${profileDir}`, '--heap-prof', `--heap-prof-dir=${profileDir}`]
    : [];
  const child = spawnBareLoop({
    mockUrl,
    concurrency,
    turns,
    warmup,
    prefix,
    nodeArgs: profile,
    ...(run.text !== undefined && { env: { BARE_TEXT: run.text } }),
  });
  const lines = createInterface({ input: child.stdout! });
  const next = (what: string) =>
    new Promise<string>((resolve, reject) => {
      const timer = setTimeout(
        () => reject(new Error(`bare loop: no '${what}' within ${timeoutMs} ms`)),
        timeoutMs,
      );
      const onLine = (line: string) => {
        if (!line.startsWith(what)) return;
        clearTimeout(timer);
        lines.off('line', onLine);
        resolve(line);
      };
      lines.on('line', onLine);
      child.once('exit', (code) => reject(new Error(`bare loop exited with ${code}`)));
    });
  try {
    await next('ready');
    const pid = child.pid!;
    const idle = memoryOf(pid).rssMb;
    const [idleCpu] = await idleCpuPct([pid]);
    const stats0 = await statsOf(prefix);
    const cpu0 = processCpuSeconds(pid) ?? 0;
    const sampler = rssSampler([pid]);
    let peakInFlight = 0;
    const inFlight = setInterval(() => {
      statsOf(prefix)
        .then((s) => {
          peakInFlight = Math.max(peakInFlight, s.inFlight);
        })
        .catch(() => undefined);
    }, 200);
    const t0 = performance.now();
    const done = next('done');
    child.stdin!.write('go\n');
    await done.finally(() => clearInterval(inFlight));
    const seconds = (performance.now() - t0) / 1000;
    if (run.settleMs) await sleep(run.settleMs);
    const cpuS = (processCpuSeconds(pid) ?? 0) - cpu0;
    const [peak] = sampler.stop();
    const stats = await statsOf(prefix);
    return {
      turns,
      modelCalls: stats.requests - stats0.requests,
      seconds: round(seconds),
      cpuS: round(cpuS),
      cpuMsPerTurn: round((cpuS * 1000) / turns, 3),
      idleRssMb: idle,
      idleCpuPct: idleCpu!,
      peakRssMb: peak!,
      peakInFlight,
    };
  } finally {
    if (profileDir && child.exitCode === null) {
      // Node writes the profiles on a normal exit: end its stdin and let it finish.
      const exited = new Promise((resolve) => child.once('exit', resolve));
      child.stdin!.end();
      await Promise.race([exited, sleep(30_000)]);
    }
    child.kill('SIGKILL');
  }
}

/**
 * Sides measured separately as one: turns, model calls and CPU summed. `at-once` (processes
 * running side by side): memory and in-flight summed, seconds the longest. `in-turn` (rounds
 * one after another): seconds summed, memory and in-flight the highest round's.
 */
export function combineSides(sides: Side[], how: 'at-once' | 'in-turn'): Side {
  const sum = (pick: (s: Side) => number) => sides.reduce((a, s) => a + pick(s), 0);
  const most = (pick: (s: Side) => number) => Math.max(...sides.map(pick));
  const held = how === 'at-once' ? sum : most;
  const turns = sum((s) => s.turns);
  const cpuS = sum((s) => s.cpuS);
  return {
    turns,
    modelCalls: sum((s) => s.modelCalls),
    seconds: round(how === 'at-once' ? most((s) => s.seconds) : sum((s) => s.seconds)),
    cpuS: round(cpuS),
    cpuMsPerTurn: round((cpuS * 1000) / turns, 3),
    idleRssMb: held((s) => s.idleRssMb),
    idleCpuPct: held((s) => s.idleCpuPct),
    peakRssMb: held((s) => s.peakRssMb),
    peakInFlight: held((s) => s.peakInFlight),
  };
}

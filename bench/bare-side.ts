import type { ChildProcess } from 'node:child_process';
import { createInterface, type Interface } from 'node:readline';
import { ANCHOR_LABEL, idleCpuPct, memoryOf, rssSampler, spawnBareLoop } from './lib/fleet.js';
import { processCpuSeconds, randomPrefix, round, sleep } from './lib/util.js';

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
  /** More arguments to node itself (V8 flags), after the profiler's. */
  nodeArgs?: string[];
  /** `generate`: the bare generateText loop (a turn nobody watches); default the streamText one. */
  mode?: 'stream' | 'generate';
}

/** What a round measures; the idle figures are the process's own (`BareProcess.idle`). */
export type BareRound = Omit<Side, 'idleRssMb' | 'idleCpuPct'>;

/** One `bench/bare-loop.mjs` process, warmed up and waiting for rounds (its protocol: the file's header). */
export class BareProcess {
  private constructor(
    private readonly child: ChildProcess,
    private readonly lines: Interface,
    readonly prefix: string,
    private readonly run: Pick<BareRun, 'timeoutMs' | 'statsOf' | 'profileDir'>,
  ) {}

  /** Spawned, and back from its warm-up turns (`ready`). */
  static async start(run: BareRun): Promise<BareProcess> {
    const prefix = randomPrefix(ANCHOR_LABEL);
    const { profileDir } = run;
    const profile = profileDir
      ? ['--cpu-prof', `--cpu-prof-dir=${profileDir}`, '--heap-prof', `--heap-prof-dir=${profileDir}`]
      : [];
    const child = spawnBareLoop({
      mockUrl: run.mockUrl,
      concurrency: run.concurrency,
      turns: run.turns,
      warmup: run.warmup,
      prefix,
      nodeArgs: [...profile, ...(run.nodeArgs ?? [])],
      env: {
        ...(run.text !== undefined && { BARE_TEXT: run.text }),
        ...(run.mode === 'generate' && { BARE_MODE: 'generate' }),
      },
    });
    const bare = new BareProcess(child, createInterface({ input: child.stdout! }), prefix, run);
    try {
      await bare.next('ready');
    } catch (err) {
      await bare.stop();
      throw err;
    }
    return bare;
  }

  get pid(): number {
    return this.child.pid!;
  }

  private next(what: string): Promise<string> {
    const { child, lines } = this;
    const { timeoutMs } = this.run;
    return new Promise<string>((resolve, reject) => {
      const onExit = (code: number | null) => done(new Error(`bare loop exited with ${code}`));
      const timer = setTimeout(
        () => done(new Error(`bare loop: no '${what}' within ${timeoutMs} ms`)),
        timeoutMs,
      );
      const onLine = (line: string) => {
        if (line.startsWith(what)) done(undefined, line);
      };
      const done = (err: Error | undefined, line = '') => {
        clearTimeout(timer);
        lines.off('line', onLine);
        child.off('exit', onExit);
        if (err) reject(err);
        else resolve(line);
      };
      lines.on('line', onLine);
      child.once('exit', onExit);
    });
  }

  /**
   * One round: `go` (its configured turns) or `go <turns> <atOnce>` (that many, `atOnce` at a
   * time, all at once by default); CPU from /proc over the round and `settleMs` after it (V8
   * finishes a burst's garbage collection there), model calls from the mock.
   */
  async round(turns?: number, settleMs = 0, atOnce = turns): Promise<BareRound> {
    const { pid } = this;
    const stats0 = await this.run.statsOf(this.prefix);
    const cpu0 = processCpuSeconds(pid) ?? 0;
    const sampler = rssSampler([pid]);
    let peakInFlight = 0;
    const inFlight = setInterval(() => {
      this.run
        .statsOf(this.prefix)
        .then((s) => {
          peakInFlight = Math.max(peakInFlight, s.inFlight);
        })
        .catch(() => undefined);
    }, 200);
    const t0 = performance.now();
    const done = this.next('done');
    this.child.stdin!.write(turns === undefined ? 'go\n' : `go ${turns} ${atOnce}\n`);
    const [, ran] = (await done.finally(() => clearInterval(inFlight))).split(' ');
    const seconds = (performance.now() - t0) / 1000;
    if (settleMs) await sleep(settleMs);
    const cpuS = (processCpuSeconds(pid) ?? 0) - cpu0;
    const [peak] = sampler.stop();
    const stats = await this.run.statsOf(this.prefix);
    const n = Number(ran);
    return {
      turns: n,
      modelCalls: stats.requests - stats0.requests,
      seconds: round(seconds),
      cpuS: round(cpuS),
      cpuMsPerTurn: round((cpuS * 1000) / n, 3),
      peakRssMb: peak!,
      peakInFlight,
    };
  }

  /** What it holds and spends between rounds: RSS, and CPU over 3 s (timers, polls). */
  async idle(): Promise<Pick<Side, 'idleRssMb' | 'idleCpuPct'>> {
    const idleRssMb = memoryOf(this.pid).rssMb;
    const [idleCpu] = await idleCpuPct([this.pid]);
    return { idleRssMb, idleCpuPct: idleCpu! };
  }

  /** Ends it: with a profile, by closing its stdin so node writes the profile on exit. */
  async stop(): Promise<void> {
    const { child } = this;
    if (this.run.profileDir && child.exitCode === null) {
      const exited = new Promise((resolve) => child.once('exit', resolve));
      child.stdin!.end();
      await Promise.race([exited, sleep(30_000)]);
    }
    child.kill('SIGKILL');
  }
}

/**
 * The anchor side of the benchmarks that weigh a worker against the bare AI SDK loop
 * (overhead, stream): `bench/bare-loop.mjs` as its own process, `turns` turns with
 * `concurrency` at once after `warmup` turns, and what /proc says it spent and held.
 */
export async function measureBare(run: BareRun): Promise<Side> {
  const bare = await BareProcess.start(run);
  try {
    const idle = await bare.idle();
    return { ...(await bare.round()), ...idle };
  } finally {
    await bare.stop();
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

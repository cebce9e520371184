import { execFileSync } from 'node:child_process';
import { cpus } from 'node:os';
import { parseArgs } from 'node:util';
import { benchCompaction, COMPACTION_DEFAULTS } from './compaction.js';
import { benchIngress, INGRESS_DEFAULTS } from './ingress.js';
import { benchPipeline, PIPELINE_DEFAULTS } from './pipeline.js';
import { benchRecovery, RECOVERY_DEFAULTS } from './recovery.js';
import { benchTokenizer, TOKENIZER_DEFAULTS } from './tokenizer.js';
import { benchTurns, TURNS_DEFAULTS } from './turns.js';
import { adminRedis, progress, REDIS_URL } from './util.js';

/**
 * Entry: `tsx bench/run.ts [--runs N] [--only ingress|turns|pipeline|compaction|tokenizer|recovery] [--duration S] [--warmup S]`
 * (the last two are the ingress seconds per measurement and of warm-up; recovery kills a
 * worker max(5, N) times and needs `npm run build`).
 * Prints one JSON document on stdout; progress goes to stderr. Targets are reported, never
 * enforced: a missed target is `meetsTarget: false`, not a failed process.
 */

const BENCHMARKS = ['ingress', 'turns', 'pipeline', 'compaction', 'tokenizer', 'recovery'] as const;
type Name = (typeof BENCHMARKS)[number];

const { values } = parseArgs({
  options: {
    runs: { type: 'string', default: '3' },
    only: { type: 'string' },
    duration: { type: 'string', default: String(INGRESS_DEFAULTS.durationS) },
    warmup: { type: 'string', default: String(INGRESS_DEFAULTS.warmupS) },
  },
  strict: true,
});

function positive(name: string, raw: string | undefined): number {
  const n = Number(raw);
  if (!Number.isFinite(n) || n <= 0) {
    process.stderr.write(`bench: --${name} must be a positive number, got ${raw}\n`);
    process.exit(2);
  }
  return n;
}

const runs = Math.floor(positive('runs', values.runs));
const only = values.only;
if (only !== undefined && !(BENCHMARKS as readonly string[]).includes(only)) {
  process.stderr.write(`bench: --only must be one of ${BENCHMARKS.join(', ')}\n`);
  process.exit(2);
}
const selected: Name[] = only ? [only as Name] : [...BENCHMARKS];

async function redisVersion(): Promise<string> {
  const redis = adminRedis();
  try {
    const info = await redis.info('server');
    return /redis_version:(\S+)/.exec(info)?.[1] ?? 'unknown';
  } finally {
    redis.disconnect();
  }
}

function git(...args: string[]): string | undefined {
  try {
    return execFileSync('git', args, { encoding: 'utf8', stdio: ['ignore', 'pipe', 'ignore'] }).trim();
  } catch {
    return undefined;
  }
}

const started = Date.now();
const report: Record<string, unknown> = {
  date: new Date().toISOString(),
  commit: git('rev-parse', '--short', 'HEAD'),
  // Others edit src/ on this tree: say when the measured code is not exactly that commit.
  srcUncommittedChanges: (git('status', '--porcelain', '--', 'src') ?? '') !== '',
  machine: {
    cpus: cpus().length,
    cpuModel: cpus()[0]?.model,
    node: process.version,
    redis: await redisVersion(),
    redisUrl: REDIS_URL,
  },
  runs,
  benchmarks: {},
};
const results: Record<string, unknown> = {};

for (const name of selected) {
  progress(`${name}: ${runs} run(s)`);
  const t0 = Date.now();
  try {
    if (name === 'ingress') {
      const durationS = positive('duration', values.duration);
      const warmupS = values.warmup === '0' ? 0 : positive('warmup', values.warmup);
      results.ingress = await benchIngress({ ...INGRESS_DEFAULTS, runs, durationS, warmupS });
    } else if (name === 'turns') {
      results.turns = await benchTurns({ ...TURNS_DEFAULTS, runs });
    } else if (name === 'pipeline') {
      results.pipeline = await benchPipeline({ ...PIPELINE_DEFAULTS, runs });
    } else if (name === 'tokenizer') {
      results.tokenizer = await benchTokenizer({ ...TOKENIZER_DEFAULTS, runs });
    } else if (name === 'recovery') {
      results.recovery = await benchRecovery({
        ...RECOVERY_DEFAULTS,
        kills: Math.max(RECOVERY_DEFAULTS.kills, runs),
      });
    } else {
      results.compaction = await benchCompaction({ ...COMPACTION_DEFAULTS, runs });
    }
  } catch (err) {
    // One broken benchmark must not hide the others' numbers.
    progress(`${name} failed: ${(err as Error).stack ?? String(err)}`);
    results[name] = { error: (err as Error).message ?? String(err) };
  }
  progress(`${name}: done in ${Math.round((Date.now() - t0) / 1000)}s`);
}

report.benchmarks = results;
report.totalSeconds = Math.round((Date.now() - started) / 1000);
// BullMQ and ioredis may leave timers behind after close, so exit explicitly — but only once
// stdout has drained: into a pipe the write is asynchronous, and exiting at once cut the
// report off at 64 KiB.
process.stdout.write(`${JSON.stringify(report, null, 2)}\n`, () => process.exit(0));

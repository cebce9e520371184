import { execFileSync } from 'node:child_process';
import { cpus } from 'node:os';
import { parseArgs } from 'node:util';
import { APPROVALS_DEFAULTS, benchApprovals } from './approvals.js';
import { benchCompaction, COMPACTION_DEFAULTS } from './compaction/index.js';
import { benchConcurrency, CONCURRENCY_DEFAULTS } from './concurrency.js';
import { benchIngress, INGRESS_DEFAULTS } from './ingress.js';
import { benchLanes, LANES_DEFAULTS } from './lanes.js';
import { writeCharts } from './lib/chart.js';
import { startOtlpSink } from './lib/otlp-sink.js';
import { adminRedis, progress, REDIS_URL } from './lib/util.js';
import { benchMemory, MEMORY_DEFAULTS } from './memory.js';
import { benchOfferedLoad, OFFERED_LOAD_DEFAULTS } from './offered-load.js';
import { benchOverhead, OVERHEAD_DEFAULTS } from './overhead.js';
import { benchPipeline, PIPELINE_DEFAULTS } from './pipeline.js';
import { benchPromptCache, PROMPT_CACHE_DEFAULTS } from './prompt-cache.js';
import { benchRecovery, RECOVERY_DEFAULTS } from './recovery.js';
import { benchReplicaAcks, REPLICA_ACKS_DEFAULTS } from './replica-acks.js';
import { benchScaling, SCALING_DEFAULTS } from './scaling.js';
import { benchSerialized, SERIALIZED_DEFAULTS } from './serialized.js';
import { benchStream, STREAM_DEFAULTS } from './stream/index.js';
import { benchTokenizer, TOKENIZER_DEFAULTS } from './tokenizer.js';
import { benchTurns, TURNS_DEFAULTS } from './turns.js';
import { benchWorkspace, WORKSPACE_DEFAULTS } from './workspace.js';

/**
 * Entry: `tsx bench/run.ts [--help] [--runs N] [--only <name>] [--duration S] [--warmup S] [--smoke] [--charts DIR] [--tracing]`
 * (duration and warmup are the ingress seconds per measurement and of warm-up; `--smoke` runs
 * the process-level benchmarks at small sizes to prove they work; `--charts` writes the SVG
 * charts of offered-load and scaling into DIR). The process-level ones (recovery, serialized,
 * overhead, concurrency, scaling, offered-load) start `dist/cli.js` processes: build first.
 * recovery kills a worker max(5, N) times. memory and stream start their own redis-server (on PATH) on a
 * free port; replica-acks its own primary and replica.
 * Prints one JSON document on stdout; progress goes to stderr. Targets are reported, never
 * enforced: a missed target is `meetsTarget: false`, not a failed process.
 */

const BENCHMARKS = [
  'ingress',
  'turns',
  'pipeline',
  'compaction',
  'tokenizer',
  'recovery',
  'serialized',
  'overhead',
  'concurrency',
  'scaling',
  'offered-load',
  'memory',
  'prompt-cache',
  'replica-acks',
  'stream',
  'workspace',
  'lanes',
  'approvals',
] as const;
type Name = (typeof BENCHMARKS)[number];

const { values } = parseArgs({
  options: {
    runs: { type: 'string', default: '3' },
    only: { type: 'string' },
    duration: { type: 'string', default: String(INGRESS_DEFAULTS.durationS) },
    warmup: { type: 'string', default: String(INGRESS_DEFAULTS.warmupS) },
    smoke: { type: 'boolean', default: false },
    charts: { type: 'string' },
    'chart-label': { type: 'string', default: '' },
    profile: { type: 'string' },
    levels: { type: 'string' },
    'node-args': { type: 'string' },
    'turns-per-slot': { type: 'string' },
    bursts: { type: 'boolean', default: false },
    apart: { type: 'boolean', default: false },
    help: { type: 'boolean', default: false },
    tracing: { type: 'boolean', default: false },
    'log-level': { type: 'string' },
  },
  strict: true,
});

if (values.help) {
  process.stdout.write(`usage: tsx bench/run.ts [--only <name>] [--runs N] [flags]   (JSON report on stdout)

benchmarks (--only): ${BENCHMARKS.join(', ')}
  the process-level ones (recovery, serialized, overhead, concurrency, scaling, offered-load,
  stream, lanes) start dist/cli.js: npm run build first. memory and stream start their own
  redis-server from PATH. workspace needs bubblewrap (exec_shell's sandbox). approvals runs
  in one process (ingress, turn worker, in-process model).

flags:
  --runs N             runs of each benchmark (default 3)
  --smoke              small sizes that prove a benchmark works; never a figure
  --duration S         ingress: seconds per measurement (default ${INGRESS_DEFAULTS.durationS})
  --warmup S           ingress: warm-up seconds (default ${INGRESS_DEFAULTS.warmupS})
  --levels A,B         overhead: turns in flight (default 100,2000); stream: concurrent
                       /v1/ui conversations (default 100,1000)
  --node-args="F …"    stream: flags for node itself on both sides of the CPU comparison alike
                       (workers and bare loop), e.g. --node-args=--no-memory-reducer; Node's defaults otherwise
  --bursts             stream: each level's conversations all at once, in rounds with pauses
                       between them, the sides apart (the method until 2026-11-28)
  --apart              stream: the chatlane side and the bare loop one after the other,
                       alternating which goes first, not at the same time
  --turns-per-slot N   overhead: turns per measurement = N × level (default 2); more turns, less spread
  --profile DIR        overhead: V8 CPU and heap profiles of both sides into DIR
  --charts DIR         offered-load, scaling: write the SVG charts into DIR
  --chart-label TEXT   title of those charts
  --tracing            ingress, overhead: chatlane exports every span (OTLP/HTTP, 100 % sampled) to a
                       local sink; compare with a run without it (docs/tracing.md, "Cost")
  --log-level L        overhead: the worker's LOG_LEVEL (default info: one line per turn); warn
                       writes none, so the pair prices the per-turn line

Figures, targets and what limits each: docs/benchmarks.md.
`);
  process.exit(0);
}

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
const levels = values.levels?.split(',').map((l) => Math.floor(positive('levels', l)));
const nodeArgs = values['node-args']?.split(/\s+/).filter(Boolean);
if (nodeArgs && only !== undefined && only !== 'stream') {
  // Only the stream benchmark passes them on: a figure must not look as if it ran with them.
  process.stderr.write(`bench: --node-args applies to the stream benchmark only, not to ${only}\n`);
  process.exit(2);
}
if ((values.bursts || values.apart) && only !== 'stream') {
  process.stderr.write('bench: --bursts and --apart apply to the stream benchmark only: add --only stream\n');
  process.exit(2);
}
const selected: Name[] = only ? [only as Name] : [...BENCHMARKS];
const smoke = values.smoke === true;
// --tracing: the chatlane processes of ingress and overhead export every span (100 % sampled,
// the default sampler) as OTLP/HTTP protobuf to a local sink; compare with a run without it.
const sink = values.tracing ? await startOtlpSink() : undefined;
const tracingEnv = sink && { OTEL_EXPORTER_OTLP_ENDPOINT: sink.url };
const LOG_LEVELS = ['fatal', 'error', 'warn', 'info', 'debug', 'trace', 'silent'];
const logLevel = values['log-level'];
if (
  logLevel !== undefined &&
  (!LOG_LEVELS.includes(logLevel) || (only !== undefined && only !== 'overhead'))
) {
  process.stderr.write(
    `bench: --log-level applies to overhead only and is one of ${LOG_LEVELS.join(', ')}\n`,
  );
  process.exit(2);
}
const workerEnv = { ...tracingEnv, ...(logLevel && { LOG_LEVEL: logLevel }) };
// Small sizes that still exercise every code path: for proving the benchmark works, never for a figure.
const SMOKE = {
  compaction: { conversationTurns: 120, chats: 40, warmupChats: 8 },
  serialized: { chats: 100, anchorJobs: 500 },
  overhead: { levels: [20, 100], latencyMs: 300, warmupTurns: 20 },
  concurrency: { levels: [20, 100], latencyMs: 500, warmupChats: 20 },
  scaling: { workers: [1, 2], chats: 256, warmupChats: 32 },
  'offered-load': { rates: [10, 40], durationS: 5 },
  memory: { chats: 500, sampleChats: 50, archiveChats: 50, steadyTurns: 600, steadyEvery: 100 },
  'replica-acks': { durationS: 2, warmupS: 1, turns: 30 },
  stream: {
    levels: [10, 40],
    warmupChats: 5,
    minRepliesPerLevel: 20,
    settleMs: 1000,
    costReplies: 10,
    memoryStreams: 50,
    timeoutMs: 60_000,
  },
  workspace: { iterations: 2 },
  lanes: { chats: 6, messagesPerChat: 4, thinkMs: '200' },
  approvals: { answers: 3 },
};

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
      results.ingress = await benchIngress({
        ...INGRESS_DEFAULTS,
        runs,
        durationS,
        warmupS,
        ...(tracingEnv && { env: tracingEnv }),
      });
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
    } else if (name === 'serialized') {
      results.serialized = await benchSerialized({
        ...SERIALIZED_DEFAULTS,
        ...(smoke && SMOKE.serialized),
        runs,
      });
    } else if (name === 'overhead') {
      results.overhead = await benchOverhead({
        ...OVERHEAD_DEFAULTS,
        ...(smoke && SMOKE.overhead),
        ...(levels && { levels }),
        ...(values['turns-per-slot'] && {
          turnsPerSlot: Math.floor(positive('turns-per-slot', values['turns-per-slot'])),
        }),
        ...(values.profile && { profileDir: values.profile }),
        ...(Object.keys(workerEnv).length > 0 && { env: workerEnv }),
        runs,
      });
    } else if (name === 'concurrency') {
      results.concurrency = await benchConcurrency({
        ...CONCURRENCY_DEFAULTS,
        ...(smoke && SMOKE.concurrency),
        runs,
      });
    } else if (name === 'scaling') {
      results.scaling = await benchScaling({ ...SCALING_DEFAULTS, ...(smoke && SMOKE.scaling), runs });
    } else if (name === 'offered-load') {
      results['offered-load'] = await benchOfferedLoad({
        ...OFFERED_LOAD_DEFAULTS,
        ...(smoke && SMOKE['offered-load']),
        runs,
      });
    } else if (name === 'prompt-cache') {
      // One pass: tokens are counted, not timed (runs does not apply).
      results['prompt-cache'] = await benchPromptCache({
        ...PROMPT_CACHE_DEFAULTS,
        ...(smoke && { turns: 6, chats: 2, smallWindowMessages: 6 }),
      });
    } else if (name === 'replica-acks') {
      results['replica-acks'] = await benchReplicaAcks({
        ...REPLICA_ACKS_DEFAULTS,
        ...(smoke && SMOKE['replica-acks']),
        runs,
      });
    } else if (name === 'stream') {
      results.stream = await benchStream({
        ...STREAM_DEFAULTS,
        ...(smoke && SMOKE.stream),
        ...(levels && { levels }),
        ...(nodeArgs && { nodeArgs }),
        bursts: values.bursts === true,
        apart: values.apart === true,
        runs,
      });
    } else if (name === 'workspace') {
      results.workspace = await benchWorkspace({
        ...WORKSPACE_DEFAULTS,
        ...(smoke && SMOKE.workspace),
        runs,
      });
    } else if (name === 'lanes') {
      results.lanes = await benchLanes({ ...LANES_DEFAULTS, ...(smoke && SMOKE.lanes), runs });
    } else if (name === 'approvals') {
      results.approvals = await benchApprovals({
        ...APPROVALS_DEFAULTS,
        ...(smoke && SMOKE.approvals),
        runs,
      });
    } else if (name === 'memory') {
      // One pass: bytes are counted, not timed (runs does not apply).
      results.memory = await benchMemory({ ...MEMORY_DEFAULTS, ...(smoke && SMOKE.memory) });
    } else {
      results.compaction = await benchCompaction({
        ...COMPACTION_DEFAULTS,
        ...(smoke && SMOKE.compaction),
        runs,
      });
    }
  } catch (err) {
    // One broken benchmark must not hide the others' numbers.
    progress(`${name} failed: ${(err as Error).stack ?? String(err)}`);
    results[name] = { error: (err as Error).message ?? String(err) };
  }
  progress(`${name}: done in ${Math.round((Date.now() - t0) / 1000)}s`);
}

report.benchmarks = results;
report.smoke = smoke;
report.tracing = sink ? { sampler: 'parentbased_always_on', exported: sink.stats() } : false;
report.workerLogLevel = logLevel ?? 'info';
await sink?.close();
report.totalSeconds = Math.round((Date.now() - started) / 1000);
if (values.charts) {
  const label = values['chart-label'] || (smoke ? 'SMOKE RUN (small sizes, not a recorded figure)' : '');
  // A chart that cannot be written must not cost the measurements: the report still prints.
  try {
    const files = writeCharts(report as { benchmarks: Record<string, unknown> }, values.charts, label);
    progress(files.length > 0 ? `charts: ${files.join(', ')}` : 'charts: no offered-load or scaling results');
  } catch (err) {
    progress(`charts: not written (${err instanceof Error ? err.message : String(err)})`);
  }
}
// BullMQ and ioredis may leave timers behind after close, so exit explicitly — but only once
// stdout has drained: into a pipe the write is asynchronous, and exiting at once cut the
// report off at 64 KiB.
process.stdout.write(`${JSON.stringify(report, null, 2)}\n`, () => process.exit(0));

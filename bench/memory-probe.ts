import { mkdirSync, readdirSync, statSync } from 'node:fs';
import { createInterface } from 'node:readline';
import { fileURLToPath } from 'node:url';
import { parseArgs } from 'node:util';
import { type RoleProcess, startRole } from '../test/helpers/processes.js';
import { ANCHOR_LABEL, BenchChats, mockStats, spawnBareLoop, startMock } from './lib/fleet.js';
import { messageText, progress, REDIS_URL, randomPrefix, sleep } from './lib/util.js';

/**
 * Where the overhead benchmark's peak RSS comes from (docs/benchmarks.md, "Wrapper overhead"): the same two
 * sides as `--only overhead` (a chatlane worker, `bench/bare-loop.mjs`) against the mock model,
 * each probed from inside. Not a benchmark: no ratios, only files for bench/memory-report.ts.
 *
 *   tsx bench/memory-probe.ts snapshots --out DIR [--level 2000] [--side both] [--step 1|2]
 *     heap snapshots after 200 warm-up turns (idle) and with `level` turns parked in their
 *     first model call (`--step 2`: in their second, after chat_send ran; the mock answers
 *     that call in 600 s): DIR/<side>/*.heapsnapshot, idle first
 *   tsx bench/memory-probe.ts promoted --out DIR …   (`level` in flight, 2 × level turns, 1 s model)
 *     where the promoted bytes were allocated: DIR/<side>.<pid>.2.json (1 = the warm-up)
 *   tsx bench/memory-probe.ts allocated --out DIR …
 *     the same for every byte allocated, collected young or not
 *   tsx bench/memory-probe.ts gc --out DIR …
 *     process memory and old space every 100 ms and at each major GC: DIR/<side>.<pid>.2.json
 *
 * `--chunk-ms N`: the mock streams each response's chunks N ms apart (the stream benchmark's
 * pacing, 50) rather than all at once; `--text-chars N`: every message on both sides is the
 * stream benchmark's text of N characters (300 there), which the mock's reply echoes.
 *
 * Build first (`npm run build`): the worker is dist/cli.js.
 */

const { positionals, values } = parseArgs({
  allowPositionals: true,
  options: {
    out: { type: 'string' },
    level: { type: 'string', default: '2000' },
    side: { type: 'string', default: 'both' },
    step: { type: 'string', default: '1' },
    'chunk-ms': { type: 'string' },
    'text-chars': { type: 'string' },
  },
});
const mode = positionals[0];
if (
  !['snapshots', 'promoted', 'allocated', 'gc'].includes(mode ?? '') ||
  !values.out ||
  !['1', '2'].includes(values.step)
) {
  throw new Error(
    'usage: memory-probe.ts snapshots|promoted|allocated|gc --out DIR [--level N] [--side both|chatlane|bare] [--step 1|2] [--chunk-ms N] [--text-chars N]',
  );
}
const dir = values.out;
const text = values['text-chars'] === undefined ? undefined : messageText(Number(values['text-chars']));
const level = Number(values.level);
const WARMUP = 200;
const PRELOAD = fileURLToPath(new URL('./memory-preload.mjs', import.meta.url));

/** Node flags and env that make `side`'s process write what `mode` collects under DIR. */
function probeOf(side: string): { nodeArgs: string[]; env: Record<string, string> } {
  if (mode === 'snapshots') {
    mkdirSync(`${dir}/${side}`, { recursive: true });
    return { nodeArgs: ['--heapsnapshot-signal=SIGWINCH', `--diagnostic-dir=${dir}/${side}`], env: {} };
  }
  return {
    nodeArgs: ['--import', PRELOAD],
    env: { MEMORY_PROBE: mode!, MEMORY_PROBE_OUT: `${dir}/${side}` },
  };
}

/** SIGWINCH `pid` and wait until the file it writes under `where` stops growing. */
async function dump(pid: number, where: string, label: string): Promise<void> {
  const before = new Set(readdirSync(where));
  process.kill(pid, 'SIGWINCH');
  let file: string | undefined;
  let size = -1;
  for (;;) {
    await sleep(500);
    file ??= readdirSync(where).find((f) => !before.has(f));
    if (!file) continue;
    const now = statSync(`${where}/${file}`).size;
    if (now === size && now > 0) break;
    size = now;
  }
  progress(`${label}: ${where}/${file}`);
}

async function control(mock: RoleProcess, body: object): Promise<void> {
  await fetch(`${mock.url!.replace(/\/v1\/?$/, '')}/control`, {
    method: 'POST',
    headers: { 'content-type': 'application/json' },
    body: JSON.stringify(body),
  });
}

const PARK_MS = 600_000;
const step = Number(values.step);

/** From now on the mock answers a turn's `step`-th model call in 600 s (its earlier ones in 1 s). */
function park(mock: RoleProcess): Promise<void> {
  return control(
    mock,
    step === 1 ? { latencyMs: [PARK_MS, PARK_MS] } : { laterRequestLatency: { from: step, ms: PARK_MS } },
  );
}

function unpark(mock: RoleProcess): Promise<void> {
  return control(mock, { latencyMs: [1000, 1000], laterRequestLatency: null });
}

/** All `level` turns are waiting in their `step`-th call: each has sent its calls so far. */
function allParked(s: { requests: number; inFlight: number }): boolean {
  return s.inFlight >= level && s.requests >= step * level;
}

const parked = mode === 'snapshots';
const turns = parked ? level : 2 * level;
const where = (side: string) => (parked ? `${dir}/${side}` : dir);

async function probeChatlane(mock: RoleProcess): Promise<void> {
  const chats = new BenchChats();
  await chats.ready();
  const probe = probeOf('chatlane');
  const worker = await startRole(
    'worker',
    {
      REDIS_URL,
      CHATLANE_PREFIX: chats.prefix,
      LLM_BASE_URL: mock.url!,
      LLM_MODEL: 'mock',
      WORKER_CONCURRENCY: String(level),
      ...probe.env,
    },
    { timeoutMs: 60_000, nodeArgs: probe.nodeArgs },
  );
  try {
    const warm = Array.from({ length: WARMUP }, (_, i) => `${chats.prefix}-w${i}`);
    await chats.seed(warm, 1, undefined, text);
    while ((await chats.pending(warm)) > 0) await sleep(200);
    if (parked) await park(mock);
    const keys = Array.from({ length: turns }, (_, i) => `${chats.prefix}-c${i}`);
    await chats.turns.pause();
    await chats.seed(keys, 1, undefined, text);
    await sleep(1000);
    await dump(worker.pid, where('chatlane'), 'chatlane idle');
    await chats.turns.resume();
    for (;;) {
      await sleep(300);
      const s = await mockStats(mock, `${chats.prefix}-c`);
      if (parked ? allParked(s) : s.requests >= 2 * turns && (await chats.pending(keys)) === 0) break;
    }
    await sleep(parked ? 3000 : 1000);
    await dump(
      worker.pid,
      where('chatlane'),
      parked ? `chatlane, ${level} parked in call ${step}` : 'chatlane run',
    );
  } finally {
    await worker.kill('SIGKILL');
    await chats.close();
    await unpark(mock);
  }
}

async function probeBare(mock: RoleProcess): Promise<void> {
  const prefix = randomPrefix(ANCHOR_LABEL);
  const probe = probeOf('bare');
  const child = spawnBareLoop({
    mockUrl: mock.url!,
    concurrency: level,
    turns,
    warmup: WARMUP,
    prefix,
    nodeArgs: probe.nodeArgs,
    env: { ...probe.env, ...(text !== undefined && { BARE_TEXT: text }) },
  });
  const lines = createInterface({ input: child.stdout! });
  const line = (what: string) =>
    new Promise<void>((resolve) => lines.on('line', (l) => l.startsWith(what) && resolve()));
  try {
    await line('ready');
    if (parked) await park(mock);
    await sleep(1000);
    await dump(child.pid!, where('bare'), 'bare idle');
    const done = line('done');
    child.stdin!.write('go\n');
    if (parked) {
      while (!allParked(await mockStats(mock, `${prefix}-`))) await sleep(300);
      await sleep(3000);
    } else {
      await done;
      await sleep(1000);
    }
    await dump(child.pid!, where('bare'), parked ? `bare, ${level} parked in call ${step}` : 'bare run');
  } finally {
    child.kill('SIGKILL');
    await unpark(mock);
  }
}

mkdirSync(dir, { recursive: true });
const mock = await startMock(1000, values['chunk-ms'] === undefined ? undefined : Number(values['chunk-ms']));
try {
  if (values.side !== 'bare') await probeChatlane(mock);
  if (values.side !== 'chatlane') await probeBare(mock);
} finally {
  await mock.kill('SIGKILL');
}

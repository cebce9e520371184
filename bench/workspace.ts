import { randomBytes } from 'node:crypto';
import { chownSync, mkdtempSync, rmSync } from 'node:fs';
import { join } from 'node:path';
import { loadConfig } from '../src/shared/config.js';
import { silentLogger } from '../src/shared/logger.js';
import { ChatStore } from '../src/shared/store/chat-store.js';
import { readWorkspace, saveWorkspace } from '../src/shared/store/workspace.js';
import { archiveWorkspace, restoreWorkspace } from '../src/worker/shell/archive.js';
import { type ExecShell, openExecShell } from '../src/worker/shell/exec-shell.js';
import { runCommand } from '../src/worker/shell/run-command.js';
import { adminRedis, deletePrefix, median, progress, randomPrefix, round } from './lib/util.js';

/**
 * What exec_shell's workspace snapshot costs a turn (docs/benchmarks.md, "exec_shell
 * workspace"). For each workspace size, per turn, wall milliseconds of:
 * - `bareCommand`: one sandboxed `true` over an empty directory (bwrap's start and end, the
 *   limits): what any command costs, snapshot or not;
 * - the snapshot's phases: `read` (GET from Redis), `restore` (gunzip + tar -x in a sandbox),
 *   `archive` (tar -c in a sandbox + hash + gzip), `save` (workspace-save.lua);
 * - end to end through a turn's ChatWorkspace: `turnReadOnly` (first command `true`: restore,
 *   command, archive, nothing written) and `turnWrite` (first command changes a file: restore,
 *   command, archive, save).
 * Each figure is the median of `iterations` turns in a run, then the median of the runs.
 * Needs bubblewrap and Redis at REDIS_URL.
 */

export interface WorkspaceBenchOptions {
  runs: number;
  iterations: number;
  /** Workspaces measured: `files` files of together about `bytes` (half text, half random). */
  sizes: Array<{ label: string; files: number; bytes: number }>;
}

export const WORKSPACE_DEFAULTS: WorkspaceBenchOptions = {
  runs: 3,
  iterations: 10,
  sizes: [
    { label: 'small', files: 5, bytes: 8 * 1024 },
    { label: '1MB', files: 100, bytes: 1024 * 1024 },
  ],
};

type Phase = 'bareCommand' | 'read' | 'restore' | 'archive' | 'save' | 'turnReadOnly' | 'turnWrite';

/** A command that fills /workspace: source-like text (compresses) and random bytes (does not). */
function fillCommand(files: number, bytes: number): string {
  const each = Math.max(1, Math.floor(bytes / files));
  const text = Math.ceil(files / 2);
  return [
    'mkdir -p src data',
    `for i in $(seq 1 ${text}); do for j in $(seq 1 ${Math.max(1, Math.floor(each / 40))}); do echo "let value_$j = compute($i, $j); // line"; done | head -c ${each} > src/file_$i.ts; done`,
    `for i in $(seq 1 ${files - text}); do head -c ${each} /dev/urandom > data/blob_$i.bin; done`,
  ].join('\n');
}

const since = (t0: bigint) => Number(process.hrtime.bigint() - t0) / 1e6;

export async function benchWorkspace(opts: WorkspaceBenchOptions) {
  const shell = await openExecShell(
    loadConfig({ EXEC_SHELL: 'on', EXEC_SHELL_WORKSPACE_MAX_BYTES: String(64 * 1024 * 1024) }),
    silentLogger(),
  );
  if (!shell) throw new Error('EXEC_SHELL=on gave no shell');
  const redis = adminRedis();
  const prefix = randomPrefix('workspace');
  const store = new ChatStore(redis, { prefix, maxEvents: 100 });
  const dirOf = (s: ExecShell) => {
    const dir = mkdtempSync(join(s.root, 'bench-'));
    if (s.spec.uid !== undefined) chownSync(dir, s.spec.uid, s.spec.uid);
    return dir;
  };
  const turn = (chatKey: string) =>
    shell.workspace({
      store,
      chatKey,
      fence: '1',
      runId: randomBytes(4).toString('hex'),
      logger: silentLogger(),
      fencedOut: () => undefined,
    });
  const limits = { maxBytes: 64 * 1024 * 1024, timeoutMs: 60_000 };
  try {
    const sizes = [];
    for (const size of opts.sizes) {
      const chatKey = `bench-${size.label}`;
      await redis.hset(store.keys(chatKey).meta, 'fence', '1');
      const seed = turn(chatKey);
      const filled = await seed.run(fillCommand(size.files, size.bytes));
      await seed.close();
      if (filled.workspace !== 'saved')
        throw new Error(`the ${size.label} workspace was not saved: ${filled.stderr}`);
      const stored = (await readWorkspace(store, chatKey))!;
      const runs: Array<Record<Phase, number>> = [];
      let tarBytes = 0;
      for (let run = 0; run < opts.runs; run++) {
        progress(`workspace ${size.label}: run ${run + 1}/${opts.runs}`);
        const samples: Record<Phase, number[]> = {
          bareCommand: [],
          read: [],
          restore: [],
          archive: [],
          save: [],
          turnReadOnly: [],
          turnWrite: [],
        };
        for (let i = 0; i < opts.iterations; i++) {
          const empty = dirOf(shell);
          let t0 = process.hrtime.bigint();
          await runCommand(shell.spec, {
            workspace: empty,
            command: 'true',
            timeoutMs: 60_000,
            outputMaxBytes: 1024,
          });
          samples.bareCommand.push(since(t0));
          rmSync(empty, { recursive: true, force: true });

          const dir = dirOf(shell);
          t0 = process.hrtime.bigint();
          const read = (await readWorkspace(store, chatKey))!;
          samples.read.push(since(t0));
          t0 = process.hrtime.bigint();
          const restored = await restoreWorkspace(shell.spec, dir, read, limits);
          samples.restore.push(since(t0));
          tarBytes = restored.bytes;
          t0 = process.hrtime.bigint();
          const archived = await archiveWorkspace(shell.spec, dir, limits);
          samples.archive.push(since(t0));
          if (archived.hash !== restored.hash) throw new Error('the restored workspace archives differently');
          t0 = process.hrtime.bigint();
          await saveWorkspace(store, chatKey, {
            fence: '1',
            runId: 'bench',
            archive: archived.archive!,
            bytes: archived.bytes,
          });
          samples.save.push(since(t0));
          rmSync(dir, { recursive: true, force: true });

          const readOnly = turn(chatKey);
          t0 = process.hrtime.bigint();
          const r = await readOnly.run('true');
          samples.turnReadOnly.push(since(t0));
          await readOnly.close();
          if (r.workspace !== 'unchanged') throw new Error(`a read-only turn was ${r.workspace}`);

          const writing = turn(chatKey);
          t0 = process.hrtime.bigint();
          const w = await writing.run(`echo ${i} > src/counter`);
          samples.turnWrite.push(since(t0));
          await writing.close();
          if (w.workspace !== 'saved') throw new Error(`a writing turn was ${w.workspace}`);
        }
        runs.push(
          Object.fromEntries(Object.entries(samples).map(([k, v]) => [k, median(v)])) as Record<
            Phase,
            number
          >,
        );
      }
      const medians = Object.fromEntries(
        (Object.keys(runs[0]!) as Phase[]).map((k) => [k, round(median(runs.map((r) => r[k])), 2)]),
      );
      sizes.push({
        label: size.label,
        files: size.files,
        tarBytes,
        storedBytes: stored.length,
        msMedian: medians,
        msPerRun: runs.map((r) => Object.fromEntries(Object.entries(r).map(([k, v]) => [k, round(v, 2)]))),
      });
    }
    return {
      iterations: opts.iterations,
      runs: opts.runs,
      sandboxUid: shell.spec.uid ?? process.getuid?.(),
      sizes,
    };
  } finally {
    await shell.close();
    await deletePrefix(redis, prefix);
    redis.disconnect();
  }
}

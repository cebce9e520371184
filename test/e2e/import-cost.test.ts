import { spawnSync } from 'node:child_process';
import { existsSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import { describe, expect, it } from 'vitest';

/**
 * What `import 'chatlane'` costs a program before it starts anything: no file of chatlane's
 * own is read (the Lua scripts are compiled into a module, the tokenizer's rank table is read on
 * the first count), and no Redis client, queue or web framework is loaded. Checked in a process
 * of its own (the test process has loaded everything already). Timings are the benchmarks'.
 */

const root = fileURLToPath(new URL('../../', import.meta.url));
const PROBE = fileURLToPath(new URL('../helpers/import-reads.mjs', import.meta.url));
const dist = (path: string) => new URL(`dist/${path}`, `file://${root}`).href;

/** The modules a program's pipeline stages build on (the defaults a stage wraps), besides the entry. */
const STAGE_MODULES = [
  'shared/store/chat-store.js',
  'worker/pipeline/provider.js',
  'worker/pipeline/compressor.js',
  'worker/pipeline/assembler.js',
  'worker/pipeline/request-cache.js',
  'worker/pipeline/sections.js',
];

function imported(modules: string[]): { reads: string[] } {
  if (!existsSync(new URL('dist/index.js', `file://${root}`)))
    throw new Error('dist/ is missing: run `npm run build`');
  const run = spawnSync(process.execPath, [PROBE, ...modules.map(dist)], { encoding: 'utf8' });
  if (run.status !== 0) throw new Error(run.stderr);
  return JSON.parse(run.stdout) as { reads: string[] };
}

describe('importing chatlane', () => {
  it('reads no Lua script and no tokenizer table, for the entry and the modules pipeline stages build on', () => {
    const { reads } = imported(['index.js', ...STAGE_MODULES]);
    expect(reads.filter((path) => /\.lua$|\.tiktoken$/.test(path))).toEqual([]);
  });

  it('loads no Redis client, queue, web framework, model provider or chat platform SDK: those load when a role starts', () => {
    const { reads } = imported(['index.js']);
    const loaded = reads.filter((path) =>
      /\/node_modules\/(ioredis|bullmq|fastify|@fastify\/[^/]+|@ai-sdk\/(openai|anthropic|google|openai-compatible|mcp)|chat|@chat-adapter\/[^/]+)\//.test(
        path,
      ),
    );
    expect(loaded).toEqual([]);
  });
});

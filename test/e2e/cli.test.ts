import { spawn } from 'node:child_process';
import { fileURLToPath } from 'node:url';
import { beforeAll, describe, expect, it } from 'vitest';
import { ensureRedis } from '../../src/demo/dev-redis.js';
import { freePort } from '../helpers/ports.js';

const CLI = fileURLToPath(new URL('../../dist/cli.js', import.meta.url));
interface RunResult {
  status: number | null;
  signal: NodeJS.Signals | null;
  stdout: string;
  stderr: string;
  /** Set when the process was still running at the timeout (then killed) or could not start. */
  error?: Error;
}

/**
 * Runs the CLI to its end. Asynchronous on purpose: a test file of back-to-back `spawnSync`
 * calls keeps its test process's event loop from turning for minutes, and vitest's reporter
 * calls from that process time out after 60 s (failing a run whose tests all passed).
 */
const run = (args: string[], env: Record<string, string>) =>
  new Promise<RunResult>((resolve) => {
    const child = spawn(process.execPath, [CLI, ...args], {
      env: { PATH: process.env.PATH ?? '', ...env },
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    let stdout = '';
    let stderr = '';
    let error: Error | undefined;
    child.stdout.setEncoding('utf8').on('data', (d: string) => {
      stdout += d;
    });
    child.stderr.setEncoding('utf8').on('data', (d: string) => {
      stderr += d;
    });
    // A process that started something despite the test is not asked twice.
    const timer = setTimeout(() => {
      error = new Error('still running after 20 s: killed');
      child.kill('SIGKILL');
    }, 20_000);
    child.on('error', (err) => {
      error = err;
    });
    child.on('close', (status, signal) => {
      clearTimeout(timer);
      resolve({ status, signal, stdout, stderr, ...(error && { error }) });
    });
  });

/**
 * A role started as a real process, every line it writes (stdout and stderr, JSON or not)
 * kept in order. Stopped by its pid only.
 */
function watchRole(role: string, env: Record<string, string>) {
  const child = spawn(process.execPath, [CLI, role], {
    env: { PATH: process.env.PATH ?? '', HOST: '127.0.0.1', METRICS_PORT: '0', PORT: '0', ...env },
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  const lines: string[] = [];
  let exitCode: number | null | undefined;
  const exited = new Promise<void>((resolve) =>
    child.once('exit', (code) => {
      exitCode = code;
      resolve();
    }),
  );
  for (const stream of [child.stdout, child.stderr]) {
    let buffer = '';
    stream.on('data', (d: Buffer) => {
      buffer += d.toString();
      const parts = buffer.split('\n');
      buffer = parts.pop()!;
      lines.push(...parts.filter((l) => l.trim() !== ''));
    });
  }
  const msg = (line: string) => {
    try {
      return String((JSON.parse(line) as { msg?: unknown }).msg);
    } catch {
      return undefined;
    }
  };
  return {
    lines,
    msg,
    exited,
    exitCode: () => exitCode,
    /** Resolves with the first line whose msg matches, or fails after `timeoutMs`. */
    async until(pattern: RegExp, timeoutMs = 30_000): Promise<string> {
      const giveUpAt = Date.now() + timeoutMs;
      for (;;) {
        const line = lines.find((l) => pattern.test(msg(l) ?? ''));
        if (line) return line;
        if (Date.now() > giveUpAt || exitCode !== undefined)
          throw new Error(`no line matching ${pattern} (exit ${exitCode}):\n${lines.join('\n')}`);
        await sleep(50);
      }
    },
    async stop(): Promise<void> {
      if (exitCode === undefined) child.kill('SIGKILL');
      await exited;
    },
  };
}

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

describe('chatlane CLI', () => {
  it('a worker with no model configured exits non-zero naming the variables to set', async () => {
    const res = await run(['worker'], { LLM_BASE_URL: '', LLM_MODEL: '' });
    expect(res.status).toBe(2);
    expect(res.stderr).toContain('no model configured');
    expect(res.stderr).toMatch(/LLM_BASE_URL and LLM_MODEL/);
  });

  // A half configuration of a model stops each role that calls models before it takes a job
  // (before it even connects to Redis), naming the variable to set.
  const halfConfigured: [string, Record<string, string>, string][] = [
    ['openai: without OPENAI_API_KEY', { LLM_MODEL: 'openai:gpt-5-mini' }, 'OPENAI_API_KEY: missing'],
    [
      'anthropic: without ANTHROPIC_API_KEY',
      { LLM_MODEL: 'anthropic:claude-haiku-4-5' },
      'ANTHROPIC_API_KEY: missing',
    ],
    [
      'google: without GOOGLE_GENERATIVE_AI_API_KEY',
      { LLM_MODEL: 'google:gemini-2.5-flash' },
      'GOOGLE_GENERATIVE_AI_API_KEY: missing',
    ],
    [
      'openai-compatible: without LLM_BASE_URL',
      { LLM_MODEL: 'openai-compatible:mock' },
      'set LLM_BASE_URL (',
    ],
    [
      'a fallback model without its key',
      { LLM_BASE_URL: 'http://127.0.0.1:9/v1', LLM_MODEL: 'mock', LLM_FALLBACK_MODELS: 'openai:gpt-5-nano' },
      'OPENAI_API_KEY: missing: LLM_FALLBACK_MODELS',
    ],
    [
      'a COMPACTION_MODEL without its key',
      {
        LLM_BASE_URL: 'http://127.0.0.1:9/v1',
        LLM_MODEL: 'mock',
        COMPACTION_MODEL: 'anthropic:claude-haiku-4-5',
      },
      "ANTHROPIC_API_KEY: missing: COMPACTION_MODEL 'anthropic:claude-haiku-4-5'",
    ],
  ];
  for (const role of ['worker', 'compactor']) {
    it.each(halfConfigured)(
      `a ${role} with %s exits non-zero naming the variable`,
      async (_case, env, message) => {
        const res = await run([role], env);
        expect(res.status).toBe(2);
        expect(res.stderr).toContain(message);
      },
    );
  }

  it('a bad configuration value stops the process with a message naming the variable', async () => {
    const res = await run(['ingress'], { PORT: 'not-a-port' });
    expect(res.status).toBe(2);
    expect(res.stderr).toMatch(/PORT:/);
  });

  it.each([
    ['worker', { REDIS_SENTINEL_NAME: 'mymaster' }, /REDIS_SENTINELS: missing/],
    ['ingress', { REDIS_SENTINELS: '127.0.0.1:26379' }, /REDIS_SENTINEL_NAME: missing/],
    ['compactor', { REDIS_SENTINEL_PASSWORD: 'x' }, /REDIS_SENTINEL_PASSWORD: set without REDIS_SENTINELS/],
  ])(
    'half a Sentinel configuration stops the %s before it connects, naming the variable',
    async (role, env, message) => {
      const res = await run([role], { LLM_BASE_URL: 'http://127.0.0.1:1/v1', LLM_MODEL: 'mock', ...env });
      expect(res.status).toBe(2);
      expect(res.stderr).toMatch(message);
    },
  );

  it('an unknown command prints the usage on stderr and exits 2', async () => {
    const res = await run(['bogus'], {});
    expect(res.status).toBe(2);
    expect(res.stderr).toContain("chatlane: unknown command 'bogus'");
    expect(res.stderr).toContain('usage: chatlane <command>');
    expect(res.stdout).toBe('');
  });

  it('--help and -h print the usage on stdout and exit 0; no command at all is a usage error (exit 2)', async () => {
    for (const flag of ['--help', '-h']) {
      const res = await run([flag], {});
      expect(res.status, flag).toBe(0);
      expect(res.stdout, flag).toMatch(/^usage: chatlane <command>/);
      for (const command of [
        'ingress',
        'worker',
        'compactor',
        'delivery',
        'all',
        'mock-llm',
        'demo',
        'loadtest',
        'config',
      ])
        expect(res.stdout, flag).toMatch(new RegExp(`^ {2}${command} `, 'm'));
      expect(res.stderr, flag).toBe('');
    }
    const bare = await run([], {});
    expect(bare.status).toBe(2);
    expect(bare.stderr).toContain('usage: chatlane <command>');
    expect(bare.stdout).toBe('');
  });

  describe('help of each command starts nothing', async () => {
    // Redis and the ports point at a port nothing listens on: a command that started anything
    // would wait for Redis (or hold its port) until the timeout kills it, instead of exiting 0.
    let closed: number;
    beforeAll(async () => {
      closed = await freePort();
    });
    const heads: [string, RegExp][] = [
      ...['ingress', 'worker', 'compactor', 'delivery', 'all', 'mock-llm'].map((role): [string, RegExp] => [
        role,
        new RegExp(`^chatlane ${role}: [\\s\\S]*\\nusage: chatlane ${role} `),
      ]),
      ['demo', /^chatlane demo: [\s\S]*\nusage: chatlane demo /],
      ['loadtest', /^usage: chatlane loadtest /],
      ['config', /^chatlane config: [\s\S]*\nusage: chatlane config /],
    ];
    it.each(
      heads.flatMap(([command, head]) => ['--help', '-h'].map((flag) => [command, flag, head] as const)),
    )('%s %s prints its help on stdout and exits 0 at once', async (command, flag, head) => {
      const res = await run([command, flag], {
        REDIS_URL: `redis://127.0.0.1:${closed}`,
        PORT: String(closed),
        METRICS_PORT: String(closed),
        MOCK_LLM_PORT: String(closed),
        LLM_MODEL: 'mock',
        LLM_BASE_URL: `http://127.0.0.1:${closed}/v1`,
      });
      expect(res.error, 'still running when the timeout killed it').toBeUndefined();
      expect(res.status).toBe(0);
      expect(res.stdout).toMatch(head);
      // Nothing logged: no Redis error, no "listening", no demo output.
      expect(res.stderr).toBe('');
    });
  });

  it('config --help prints the usage of config, not the reference', async () => {
    const res = await run(['config', '--help'], {});
    expect(res.status).toBe(0);
    expect(res.stdout).toContain('usage: chatlane config [--role <role>] [--markdown]');
    expect(res.stdout).toContain('--markdown');
    expect(res.stdout).not.toMatch(/^REDIS_URL {2}\(/m);
    expect(res.stdout.length).toBeLessThan(2000);
  });

  it("a role's help lists Start here first (the model, Redis, the port, access), then the rest by area", async () => {
    const worker = (await run(['worker', '--help'], {})).stdout;
    const groups = [...worker.matchAll(/^== (.+) ==$/gm)].map((m) => m[1]);
    expect(groups[0]).toBe('Start here: the model, Redis, the port, access');
    expect(groups).toEqual(
      expect.arrayContaining(['Redis', 'Model', 'Turns and limits', 'Compaction', 'Chat platforms']),
    );
    const variables = [...worker.matchAll(/^([A-Z][A-Z0-9_]+) {2}\(/gm)].map((m) => m[1]);
    expect(variables.slice(0, 5)).toEqual([
      'LLM_MODEL',
      'OPENAI_API_KEY',
      'ANTHROPIC_API_KEY',
      'GOOGLE_GENERATIVE_AI_API_KEY',
      'REDIS_URL',
    ]);
  });

  it("config lists the chat platforms' variables in their own group, for the roles that read them", async () => {
    const all = (await run(['config'], {})).stdout;
    expect(all).toContain('\n== Chat platforms ==\n');
    for (const name of [
      'TELEGRAM_BOT_TOKEN',
      'SLACK_SIGNING_SECRET',
      'WHATSAPP_ACCESS_TOKEN',
      'GOOGLE_CHAT_CREDENTIALS',
    ])
      expect(all).toMatch(new RegExp(`^${name} {2}\\(`, 'm'));
    expect((await run(['config', '--role', 'delivery'], {})).stdout).toContain('TELEGRAM_BOT_TOKEN');
    expect((await run(['config', '--role', 'compactor'], {})).stdout).not.toContain('TELEGRAM_BOT_TOKEN');
    expect((await run(['config', '--markdown'], {})).stdout).toContain(
      '| `TELEGRAM_BOT_TOKEN` | telegram | yes |',
    );
  });

  it('a role given an argument it does not take refuses it with exit 2 and starts nothing', async () => {
    const res = await run(['worker', '--concurrency', '4'], { REDIS_URL: 'redis://127.0.0.1:1' });
    expect(res.status).toBe(2);
    expect(res.stderr).toContain("chatlane worker: unexpected argument '--concurrency'");
    expect((await run(['config', '--rol', 'worker'], {})).status).toBe(2);
  });

  it("config --role worker prints the worker's variables with their defaults, and none only the ingress reads", async () => {
    const res = await run(['config', '--role', 'worker'], {});
    expect(res.status).toBe(0);
    expect(res.stdout).toMatch(/^WORKER_CONCURRENCY {2}\(integer; ≥ 1; default 32; roles: worker\)$/m);
    expect(res.stdout).toContain('LLM_BASE_URL');
    expect(res.stdout).not.toMatch(/^PORT /m);
    expect((await run(['config'], {})).stdout).toMatch(
      /^PORT {2}\(integer; 0–65535; default 3000; roles: ingress\)$/m,
    );
  });

  it('config refuses a role that does not exist', async () => {
    const res = await run(['config', '--role', 'janitor'], {});
    expect(res.status).toBe(2);
    expect(res.stderr).toContain('--role must be one of');
  });

  it('<role> --help says what the role does and which variables it needs, and starts nothing', async () => {
    const res = await run(['compactor', '--help'], { REDIS_URL: 'redis://127.0.0.1:1' });
    expect(res.status).toBe(0);
    expect(res.stdout).toContain('chatlane compactor: Summarises');
    expect(res.stdout).toContain('COMPACTION_MODEL');
    expect(res.stdout).not.toContain('WORKER_CONCURRENCY');
  });

  describe('a role waiting for Redis at start', () => {
    const model = { LLM_MODEL: 'mock', LLM_BASE_URL: 'http://127.0.0.1:9/v1', LOG_LEVEL: 'info' };

    it('logs one line every few seconds naming REDIS_URL and why, not one per retry, and starts once Redis answers', async () => {
      const port = await freePort();
      const url = `redis://127.0.0.1:${port}`;
      const worker = watchRole('worker', { ...model, REDIS_URL: url });
      let redis: Awaited<ReturnType<typeof ensureRedis>> | undefined;
      try {
        const first = await worker.until(/^waiting for Redis/);
        expect(worker.msg(first)).toBe(
          `waiting for Redis at ${url} (REDIS_URL) to answer: connect ECONNREFUSED 127.0.0.1:${port}; retrying`,
        );
        // ioredis retries every 50 ms at first, then every 2 s: a line per retry would be
        // dozens in this window; one line per 5 s is two (fewer on a slow machine).
        await sleep(6000);
        const waiting = [...worker.lines];
        expect(waiting.map(worker.msg), waiting.join('\n')).toEqual(
          waiting.map(() => expect.stringMatching(/^waiting for Redis at .* \(REDIS_URL\) to answer: /)),
        );
        expect(waiting.length).toBeLessThanOrEqual(3);

        redis = await ensureRedis(url);
        await worker.until(/^worker started$/);
        expect(
          worker.lines.some((l) =>
            /^Redis at .* \(REDIS_URL\) answered after \d+ s$/.test(worker.msg(l) ?? ''),
          ),
        ).toBe(true);
      } finally {
        await worker.stop();
        await redis?.stop();
      }
    });

    it('an ingress gives up after 10 s with one line naming REDIS_URL, exit 1', async () => {
      const port = await freePort();
      const ingress = watchRole('ingress', { REDIS_URL: `redis://127.0.0.1:${port}`, LOG_LEVEL: 'info' });
      try {
        await ingress.exited;
        expect(ingress.exitCode()).toBe(1);
        const last = ingress.lines.at(-1);
        expect(last).toBe(
          `chatlane: Redis at redis://127.0.0.1:${port} (REDIS_URL) did not answer within 10 s: connect ECONNREFUSED 127.0.0.1:${port}`,
        );
        const waiting = ingress.lines.filter((l) => /^waiting for Redis/.test(ingress.msg(l) ?? ''));
        expect(waiting.length).toBeGreaterThanOrEqual(1);
        expect(waiting.length).toBeLessThanOrEqual(4);
        // Besides them: the open-API warning and the last line; no retry's own line.
        expect(ingress.lines.length - waiting.length, ingress.lines.join('\n')).toBeLessThanOrEqual(2);
      } finally {
        await ingress.stop();
      }
    });
  });
});

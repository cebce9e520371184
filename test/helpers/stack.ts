import { afterAll, beforeAll } from 'vitest';
import { type MockLlmOptions, startMockLlm } from '../../src/mock-llm/server.js';
import { ChatStore } from '../../src/shared/store/chat-store.js';
import { type RoleProcess, startRole } from './processes.js';
import { deletePrefix, randomPrefix, testRedis } from './redis.js';

type Role = 'ingress' | 'worker' | 'compactor' | 'delivery';

export interface Stack {
  redis: ReturnType<typeof testRedis>;
  prefix: string;
  store: ChatStore;
  /** Set in beforeAll. */
  mock: Awaited<ReturnType<typeof startMockLlm>>;
  /** The environment every process of this stack runs with. */
  env: Record<string, string>;
  procs: RoleProcess[];
  ingressUrl(): string;
  /** Each process's last warnings and errors: what an assertion message needs when a run fails. */
  problems(): string;
  /** `entry`: a script to run in the CLI's place (startRole). */
  start(role: Role, extraEnv?: Record<string, string>, options?: { entry?: string }): Promise<RoleProcess>;
}

/**
 * An end-to-end stack for one describe block: a key prefix, the mock model, and real
 * `chatlane` processes started in `roles` order. Everything is stopped and deleted afterAll.
 */
export function useStack(
  label: string,
  opts: {
    roles: Role[];
    latencyMs?: MockLlmOptions['latencyMs'];
    env?: Record<string, string>;
    maxEvents?: number;
  },
): Stack {
  const redis = testRedis();
  const prefix = randomPrefix(label);
  const stack: Stack = {
    redis,
    prefix,
    store: new ChatStore(redis, { prefix, maxEvents: opts.maxEvents ?? 1000 }),
    mock: undefined as unknown as Stack['mock'],
    env: {},
    procs: [],
    ingressUrl: () => stack.procs.find((p) => p.url)?.url ?? '',
    problems: () =>
      stack.procs
        .map((p) => {
          const lines = p.logs.filter((l) => Number(l.level) >= 40).slice(-8);
          const name = String(p.logs.find((l) => l.name)?.name ?? 'process');
          return `--- ${name} (pid ${p.pid}): ${lines.length === 0 ? 'no warnings' : ''}\n${lines.map((l) => JSON.stringify(l)).join('\n')}`;
        })
        .join('\n'),
    async start(role, extraEnv = {}, options = {}) {
      const proc = await startRole(role, { ...stack.env, ...extraEnv }, options);
      stack.procs.push(proc);
      return proc;
    },
  };

  beforeAll(async () => {
    stack.mock = await startMockLlm({ port: 0, latencyMs: opts.latencyMs ?? [0, 0] });
    stack.env = { CHATLANE_PREFIX: prefix, LLM_BASE_URL: stack.mock.url, LLM_MODEL: 'mock', ...opts.env };
    for (const role of opts.roles) await stack.start(role);
  }, 60_000);

  afterAll(async () => {
    await Promise.all(stack.procs.map((p) => p.kill('SIGKILL')));
    await stack.mock?.close();
    await deletePrefix(redis, prefix);
    redis.disconnect();
  });

  return stack;
}

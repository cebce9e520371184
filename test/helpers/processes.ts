import { type ChildProcess, spawn } from 'node:child_process';
import { existsSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import { REDIS_URL } from './redis.js';

const CLI = fileURLToPath(new URL('../../dist/cli.js', import.meta.url));

const READY_MESSAGES = [
  'ingress listening',
  'worker started',
  'compactor started',
  'delivery started',
  'mock-llm listening',
];

export interface RoleProcess {
  child: ChildProcess;
  pid: number;
  /** pino JSON lines the process wrote so far. */
  logs: Array<Record<string, unknown>>;
  url?: string;
  kill(signal?: NodeJS.Signals): Promise<void>;
}

/**
 * Start `node dist/cli.js <role>` as a real process and wait until it says it is up
 * ('ingress listening' / 'worker started' / …), or, with `readyUrl` (a process logging below
 * info says nothing), until that URL answers 200. Tests kill only what they started, by pid.
 * `entry` runs another script in the CLI's place (a test's own worker, built from dist/).
 */
export async function startRole(
  role: 'ingress' | 'worker' | 'compactor' | 'delivery' | 'all' | 'mock-llm',
  env: Record<string, string>,
  {
    timeoutMs = 20_000,
    nodeArgs = [] as string[],
    readyUrl = undefined as string | undefined,
    entry = CLI,
  } = {},
): Promise<RoleProcess> {
  if (!existsSync(CLI)) throw new Error('dist/cli.js is missing: run `npm run build` (npm test does)');
  const child = spawn(process.execPath, [...nodeArgs, entry, role], {
    env: {
      ...process.env,
      REDIS_URL,
      HOST: '127.0.0.1',
      PORT: '0',
      LOG_LEVEL: 'info',
      METRICS_PORT: '0',
      ...env,
    },
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  const logs: Array<Record<string, unknown>> = [];
  let stderr = '';
  let buffer = '';
  child.stderr!.on('data', (d: Buffer) => {
    stderr += d.toString();
  });
  const ready = new Promise<string | undefined>((resolve, reject) => {
    const timer = setTimeout(() => {
      // Nobody holds a handle on a process that never got ready: it must not outlive the caller.
      child.kill('SIGKILL');
      reject(new Error(`${role} did not start in ${timeoutMs}ms: ${stderr}`));
    }, timeoutMs);
    child.once('exit', (code) => {
      clearTimeout(timer);
      reject(new Error(`${role} exited with ${code} before it was ready: ${stderr}`));
    });
    const poll = async () => {
      const ok = await fetch(readyUrl!).then(
        (r) => r.ok,
        () => false,
      );
      if (ok) {
        clearTimeout(timer);
        resolve(undefined);
      } else if (child.exitCode === null) setTimeout(poll, 100);
    };
    if (readyUrl) void poll();
    child.stdout!.on('data', (d: Buffer) => {
      buffer += d.toString();
      let nl = buffer.indexOf('\n');
      while (nl >= 0) {
        const line = buffer.slice(0, nl);
        buffer = buffer.slice(nl + 1);
        nl = buffer.indexOf('\n');
        try {
          const entry = JSON.parse(line) as Record<string, unknown>;
          logs.push(entry);
          if (READY_MESSAGES.includes(String(entry.msg))) {
            clearTimeout(timer);
            resolve(typeof entry.url === 'string' ? entry.url : undefined);
          }
        } catch {
          // Not a log line.
        }
      }
    });
  });
  const url = await ready;
  const proc: RoleProcess = {
    child,
    pid: child.pid!,
    logs,
    ...(url ? { url } : {}),
    async kill(signal: NodeJS.Signals = 'SIGTERM') {
      if (child.exitCode !== null || child.signalCode !== null) return;
      const exited = new Promise((r) => child.once('exit', r));
      child.kill(signal);
      await exited;
    },
  };
  child.removeAllListeners('exit');
  return proc;
}

/** Post with a bounded number of requests in flight. */
export async function inParallel<T>(
  items: T[],
  limit: number,
  fn: (item: T) => Promise<void>,
): Promise<void> {
  let next = 0;
  const runners = Array.from({ length: Math.min(limit, items.length) }, async () => {
    while (next < items.length) {
      const item = items[next++]!;
      await fn(item);
    }
  });
  await Promise.all(runners);
}

/**
 * POST one message as a well-behaved client does: a 503 (Redis slower than the ingress's
 * command timeout — on a loaded test machine too) means "maybe stored, retry with the same
 * id", so it retries for up to 15 s; the id keeps the retry from storing it twice.
 */
export async function postMessage(
  baseUrl: string,
  chatKey: string,
  id: string,
  text: string,
  metadata?: Record<string, string>,
): Promise<void> {
  const giveUpAt = Date.now() + 15_000;
  for (;;) {
    const res = await fetch(`${baseUrl}/v1/chats/${chatKey}/messages`, {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify({ id, text, ...(metadata && { metadata }) }),
    });
    if (res.status === 202) return;
    const body = await res.text();
    if (res.status !== 503 || Date.now() > giveUpAt)
      throw new Error(`POST ${chatKey}/${id} → ${res.status} ${body}`);
    await new Promise((resolve) => setTimeout(resolve, 200));
  }
}

/** How a process run to its end went (`runToExit`). */
export interface ProcessRun {
  code: number | null;
  signal: NodeJS.Signals | null;
  out: string;
  err: string;
  /** Still running at the deadline: killed (a handle held it open, or it hung). */
  hung: boolean;
}

/** Runs a command to its own exit, or kills it at `timeoutMs` and says so; its output kept. */
export function runToExit(
  command: string,
  args: string[],
  options: { cwd?: string; env?: NodeJS.ProcessEnv; timeoutMs: number },
): Promise<ProcessRun> {
  const child = spawn(command, args, { cwd: options.cwd, env: options.env ?? process.env });
  let out = '';
  let err = '';
  child.stdout!.on('data', (d: Buffer) => {
    out += d.toString();
  });
  child.stderr!.on('data', (d: Buffer) => {
    err += d.toString();
  });
  return new Promise((resolve) => {
    let hung = false;
    const timer = setTimeout(() => {
      hung = true;
      child.kill('SIGKILL');
    }, options.timeoutMs);
    child.once('exit', (code, signal) => {
      clearTimeout(timer);
      resolve({ code, signal, out, err, hung });
    });
  });
}

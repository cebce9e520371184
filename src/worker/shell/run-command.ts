import type { ChildProcess } from 'node:child_process';
import { CappedOutput } from './capped-output.js';
import { killSandboxed, type SandboxSpec, spawnSandboxed } from './sandbox.js';

export interface Settled {
  /** The sandbox's exit code: the command's, or 128 + its signal; null when we killed it. */
  exitCode: number | null;
  timedOut: boolean;
  aborted: boolean;
}

/**
 * Wait for a sandboxed process to end and its output to close; kill its whole sandbox at
 * `timeoutMs` or when `signal` aborts. Never rejects for the process's own failure (a spawn
 * error resolves as exit code 127 with the error on `onError`).
 */
export function settle(
  child: ChildProcess,
  opts: { timeoutMs: number; signal?: AbortSignal | undefined; onError?: (err: Error) => void },
): Promise<Settled> {
  return new Promise((resolve) => {
    let timedOut = false;
    let aborted = false;
    let spawnError = false;
    const timer = setTimeout(() => {
      timedOut = true;
      killSandboxed(child);
    }, opts.timeoutMs);
    const onAbort = () => {
      aborted = true;
      killSandboxed(child);
    };
    opts.signal?.addEventListener('abort', onAbort, { once: true });
    if (opts.signal?.aborted) onAbort();
    child.once('error', (err) => {
      spawnError = true;
      opts.onError?.(err);
    });
    child.once('close', (code) => {
      clearTimeout(timer);
      opts.signal?.removeEventListener('abort', onAbort);
      const killed = timedOut || aborted;
      resolve({ exitCode: killed ? null : spawnError ? 127 : (code ?? null), timedOut, aborted });
    });
  });
}

export interface CommandResult extends Settled {
  stdout: string;
  stderr: string;
  /** Bytes of stdout / stderr left out of the text (EXEC_SHELL_OUTPUT_MAX_BYTES). */
  stdoutDropped: number;
  stderrDropped: number;
  durationMs: number;
}

export interface CommandOptions {
  /** Host directory of the workspace. */
  workspace: string;
  command: string;
  timeoutMs: number;
  /** Cap of stdout and of stderr, each. */
  outputMaxBytes: number;
  signal?: AbortSignal | undefined;
  network?: boolean;
  env?: Record<string, string>;
  /** Directory to run in (inside the sandbox; relative to /workspace); /workspace when absent. */
  cwd?: string | undefined;
}

/** `bash -c command`, first changing to `cwd` when one is given. */
export function commandArgv(command: string, cwd?: string): string[] {
  if (cwd === undefined) return ['/bin/bash', '-c', command];
  return ['/bin/bash', '-c', 'cd -- "$1" || exit 1; exec /bin/bash -c "$2"', 'chatlane-cd', cwd, command];
}

/** `bash -c command` in the sandbox, over the workspace, with every limit. */
export async function runCommand(spec: SandboxSpec, opts: CommandOptions): Promise<CommandResult> {
  const started = Date.now();
  const child = spawnSandboxed(spec, {
    workspace: opts.workspace,
    argv: commandArgv(opts.command, opts.cwd),
    network: opts.network ?? true,
    ...(opts.env && { env: opts.env }),
  });
  const stdout = new CappedOutput(opts.outputMaxBytes);
  const stderr = new CappedOutput(opts.outputMaxBytes);
  child.stdout!.on('data', (chunk: Buffer) => stdout.push(chunk));
  child.stderr!.on('data', (chunk: Buffer) => stderr.push(chunk));
  const settled = await settle(child, {
    timeoutMs: opts.timeoutMs,
    signal: opts.signal,
    onError: (err) => stderr.push(Buffer.from(`chatlane: the sandbox did not start: ${err.message}\n`)),
  });
  return {
    ...settled,
    stdout: stdout.text(),
    stderr: stderr.text(),
    stdoutDropped: stdout.dropped,
    stderrDropped: stderr.dropped,
    durationMs: Date.now() - started,
  };
}

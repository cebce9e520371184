import { Readable, Writable } from 'node:stream';
import type {
  Experimental_SandboxDirectoryEntry as DirectoryEntry,
  Experimental_SandboxFileStat as FileStat,
  Experimental_SandboxProcess as SandboxProcess,
  Experimental_SandboxSession as SandboxSession,
} from 'ai';
import { commandArgv, settle } from './run-command.js';
import { killSandboxed, spawnSandboxed } from './sandbox.js';
import type { ChatWorkspace } from './workspace.js';

/**
 * The chat's workspace as the AI SDK's `Experimental_SandboxSession`, handed to the tool loop
 * (`experimental_sandbox`): an AI SDK tool that runs in a sandbox (Anthropic's provider bash
 * tool calls `run`) gets the same sandbox, limits and workspace as exec_shell. Every method
 * runs inside the sandbox (file reads and writes too: a path, or a symlink in it, resolves in
 * the sandbox's view, never the worker's), one at a time with the turn's commands; what
 * changes the workspace is followed by its save. Paths are relative to /workspace.
 */

/** Exit codes the file scripts below use for the session's nulls and refusals. */
const MISSING = 44;
const IS_DIRECTORY = 45;
const NOT_DIRECTORY = 46;

const SCRIPTS = {
  read: `[ -e "$1" ] || exit ${MISSING}; [ -d "$1" ] && exit ${IS_DIRECTORY}; exec cat -- "$1"`,
  write: `[ -d "$1" ] && exit ${IS_DIRECTORY}; mkdir -p -- "$(dirname -- "$1")" && exec cat > "$1"`,
  stat: `[ -e "$1" ] || exit ${MISSING}; exec stat -L -c '%F|%s' -- "$1"`,
  list: `[ -e "$1" ] || exit ${MISSING}; [ -d "$1" ] || exit ${NOT_DIRECTORY}; exec find "$1" -mindepth 1 -maxdepth 1 -printf '%y %f\\0'`,
  delete: `[ -e "$1" ] || [ -L "$1" ] || exit ${MISSING}; [ -d "$1" ] && [ ! -L "$1" ] && exit ${IS_DIRECTORY}; exec rm -f -- "$1"`,
};

export class SandboxSessionError extends Error {
  override name = 'SandboxSessionError';
}

interface Exec {
  exitCode: number | null;
  stdout: Buffer;
  stderr: string;
}

export class WorkspaceSession implements SandboxSession {
  readonly description: string;

  constructor(
    private readonly workspace: ChatWorkspace,
    description: string,
  ) {
    this.description = description;
  }

  /** One file script in the sandbox over the workspace; stdout at most the workspace cap. */
  private exec(
    dir: string,
    script: keyof typeof SCRIPTS,
    path: string,
    opts: { stdin?: Buffer; signal?: AbortSignal | undefined } = {},
  ): Promise<Exec> {
    const host = this.workspace.sandbox;
    const child = spawnSandboxed(host.spec, {
      workspace: dir,
      argv: ['/bin/bash', '-c', SCRIPTS[script], `chatlane-${script}`, path],
      stdin: opts.stdin ? 'pipe' : 'ignore',
    });
    const out: Buffer[] = [];
    let outBytes = 0;
    let tooLarge = false;
    child.stdout!.on('data', (chunk: Buffer) => {
      outBytes += chunk.length;
      if (outBytes > host.workspaceMaxBytes) {
        tooLarge = true;
        killSandboxed(child);
      } else out.push(chunk);
    });
    let stderr = '';
    child.stderr!.on('data', (chunk: Buffer) => {
      if (stderr.length < 2000) stderr += chunk.toString('utf8');
    });
    if (opts.stdin) {
      child.stdin!.on('error', () => undefined);
      child.stdin!.end(opts.stdin);
    }
    return settle(child, { timeoutMs: host.timeoutMs, signal: opts.signal }).then((done) => {
      if (tooLarge) throw new SandboxSessionError(`${path}: larger than ${host.workspaceMaxBytes} bytes`);
      if (done.timedOut) throw new SandboxSessionError(`${path}: timed out`);
      if (done.aborted) throw opts.signal?.reason ?? new SandboxSessionError('aborted');
      return { exitCode: done.exitCode, stdout: Buffer.concat(out), stderr: stderr.trim() };
    });
  }

  private failure(path: string, res: Exec): SandboxSessionError {
    if (res.exitCode === IS_DIRECTORY) return new SandboxSessionError(`${path} is a directory`);
    if (res.exitCode === NOT_DIRECTORY) return new SandboxSessionError(`${path} is not a directory`);
    return new SandboxSessionError(`${path}: ${res.stderr || `exit ${res.exitCode}`}`);
  }

  readonly readBinaryFile = ({ path, abortSignal }: { path: string; abortSignal?: AbortSignal }) =>
    this.workspace.use(
      async (dir) => {
        const res = await this.exec(dir, 'read', path, { signal: abortSignal });
        if (res.exitCode === MISSING) return null;
        if (res.exitCode !== 0) throw this.failure(path, res);
        return new Uint8Array(res.stdout.buffer, res.stdout.byteOffset, res.stdout.length);
      },
      { mutates: false },
    );

  readonly readFile = async (opts: { path: string; abortSignal?: AbortSignal }) => {
    const bytes = await this.readBinaryFile(opts);
    return bytes === null ? null : (Readable.toWeb(Readable.from([bytes])) as ReadableStream<Uint8Array>);
  };

  readonly readTextFile = async (opts: {
    path: string;
    abortSignal?: AbortSignal;
    encoding?: string;
    startLine?: number;
    endLine?: number;
  }) => {
    const bytes = await this.readBinaryFile(opts);
    if (bytes === null) return null;
    const text = new TextDecoder(opts.encoding ?? 'utf-8').decode(bytes);
    if (opts.startLine === undefined && opts.endLine === undefined) return text;
    const lines = text.split('\n');
    return lines.slice((opts.startLine ?? 1) - 1, opts.endLine ?? lines.length).join('\n');
  };

  readonly writeBinaryFile = ({
    path,
    content,
    abortSignal,
  }: {
    path: string;
    content: Uint8Array;
    abortSignal?: AbortSignal;
  }) =>
    this.workspace.use(
      async (dir) => {
        const res = await this.exec(dir, 'write', path, { stdin: Buffer.from(content), signal: abortSignal });
        if (res.exitCode !== 0) throw this.failure(path, res);
      },
      { mutates: true, signal: abortSignal },
    );

  readonly writeTextFile = (opts: {
    path: string;
    content: string;
    abortSignal?: AbortSignal;
    encoding?: string;
  }) => this.writeBinaryFile({ ...opts, content: encode(opts.content, opts.encoding) });

  readonly writeFile = async (opts: {
    path: string;
    content: ReadableStream<Uint8Array>;
    abortSignal?: AbortSignal;
  }) => {
    const chunks: Uint8Array[] = [];
    let bytes = 0;
    for await (const chunk of opts.content) {
      bytes += chunk.length;
      if (bytes > this.workspace.sandbox.workspaceMaxBytes)
        throw new SandboxSessionError(
          `${opts.path}: larger than ${this.workspace.sandbox.workspaceMaxBytes} bytes`,
        );
      chunks.push(chunk);
    }
    await this.writeBinaryFile({ ...opts, content: Buffer.concat(chunks) });
  };

  readonly stat = ({ path, abortSignal }: { path: string; abortSignal?: AbortSignal }) =>
    this.workspace.use(
      async (dir): Promise<FileStat | null> => {
        const res = await this.exec(dir, 'stat', path, { signal: abortSignal });
        if (res.exitCode === MISSING) return null;
        if (res.exitCode !== 0) throw this.failure(path, res);
        const [kind, size] = res.stdout.toString('utf8').trim().split('|');
        const type = kind === 'directory' ? 'directory' : kind?.startsWith('regular') ? 'file' : 'other';
        return { type, size: Number(size) };
      },
      { mutates: false },
    );

  readonly listDirectory = ({ path, abortSignal }: { path: string; abortSignal?: AbortSignal }) =>
    this.workspace.use(
      async (dir): Promise<DirectoryEntry[] | null> => {
        const res = await this.exec(dir, 'list', path, { signal: abortSignal });
        if (res.exitCode === MISSING) return null;
        if (res.exitCode !== 0) throw this.failure(path, res);
        return res.stdout
          .toString('utf8')
          .split('\0')
          .filter(Boolean)
          .map((entry) => ({ name: entry.slice(2), type: ENTRY_TYPES[entry[0]!] ?? 'other' }));
      },
      { mutates: false },
    );

  readonly deleteFile = ({ path, abortSignal }: { path: string; abortSignal?: AbortSignal }) =>
    this.workspace.use(
      async (dir) => {
        const res = await this.exec(dir, 'delete', path, { signal: abortSignal });
        if (res.exitCode === MISSING) return false;
        if (res.exitCode !== 0) throw this.failure(path, res);
        return true;
      },
      { mutates: true, signal: abortSignal },
    );

  readonly run = async (opts: {
    command: string;
    workingDirectory?: string;
    env?: Record<string, string>;
    abortSignal?: AbortSignal;
  }) => {
    const run = await this.workspace.run(opts.command, opts.abortSignal, {
      cwd: opts.workingDirectory,
      ...(opts.env && { env: checkedEnv(opts.env) }),
    });
    if (run.aborted) throw opts.abortSignal?.reason ?? new SandboxSessionError('aborted');
    const killed = run.timedOut ? `\n[killed: over the ${this.workspace.sandbox.timeoutMs} ms limit]` : '';
    return { exitCode: run.exitCode ?? 137, stdout: run.stdout, stderr: run.stderr + killed };
  };

  /**
   * A process in the sandbox, its output streamed as it comes (not capped: the caller reads
   * it). It holds the workspace until it ends (then the workspace is saved, as after a
   * command) and is killed at EXEC_SHELL_TIMEOUT_MS like one.
   */
  readonly spawn = ((opts: {
    command: string;
    workingDirectory?: string;
    env?: Record<string, string>;
    abortSignal?: AbortSignal;
    stdin?: boolean;
  }) => {
    const env = opts.env && checkedEnv(opts.env);
    return new Promise<SandboxProcess & { stdin?: WritableStream<Uint8Array> }>((resolve, reject) => {
      this.workspace
        .use(
          async (dir) => {
            const host = this.workspace.sandbox;
            const child = spawnSandboxed(host.spec, {
              workspace: dir,
              argv: commandArgv(opts.command, opts.workingDirectory),
              stdin: opts.stdin ? 'pipe' : 'ignore',
              network: host.network,
              ...(env && { env }),
            });
            const ended = settle(child, { timeoutMs: host.timeoutMs, signal: opts.abortSignal });
            resolve({
              ...(child.pid !== undefined && { pid: child.pid }),
              stdout: Readable.toWeb(child.stdout!) as ReadableStream<Uint8Array>,
              stderr: Readable.toWeb(child.stderr!) as ReadableStream<Uint8Array>,
              ...(opts.stdin && { stdin: Writable.toWeb(child.stdin!) as WritableStream<Uint8Array> }),
              wait: () =>
                ended.then((done) => {
                  if (done.aborted) throw opts.abortSignal?.reason ?? new SandboxSessionError('aborted');
                  return { exitCode: done.exitCode ?? 137 };
                }),
              kill: async () => {
                killSandboxed(child);
                await ended;
              },
            });
            await ended;
          },
          { mutates: true, signal: opts.abortSignal },
        )
        .catch(reject);
    });
  }) as SandboxSession['spawn'];
}

const ENTRY_TYPES: Record<string, DirectoryEntry['type']> = { f: 'file', d: 'directory', l: 'symlink' };

/** Variables a command is given: names a shell can hold. */
function checkedEnv(env: Record<string, string>): Record<string, string> {
  for (const name of Object.keys(env)) {
    if (!/^[A-Za-z_][A-Za-z0-9_]*$/.test(name))
      throw new SandboxSessionError(`'${name}' is not a variable name`);
  }
  return env;
}

function encode(text: string, encoding = 'utf-8'): Uint8Array {
  const name = encoding.toLowerCase().replace('-', '');
  if (!Buffer.isEncoding(name)) throw new SandboxSessionError(`unsupported encoding ${encoding}`);
  return Buffer.from(text, name as BufferEncoding);
}

import { chmod, chown, mkdtemp, readdir, rm } from 'node:fs/promises';
import { join } from 'node:path';
import type { Logger } from '../../shared/logger.js';
import type { ChatStore } from '../../shared/store/chat-store.js';
import { readWorkspace, saveWorkspace } from '../../shared/store/workspace.js';
import { type Archived, archiveWorkspace, restoreWorkspace } from './archive.js';
import { type CommandOptions, type CommandResult, runCommand, settle } from './run-command.js';
import { type SandboxSpec, spawnSandboxed } from './sandbox.js';

/** What a workspace needs of its process: the sandbox and the limits (ExecShell). */
export interface WorkspaceHost {
  spec: SandboxSpec;
  /** Per-process directory the turns' workspaces are made in. */
  root: string;
  timeoutMs: number;
  outputMaxBytes: number;
  workspaceMaxBytes: number;
  /** Whether commands get the allow-list proxy (EXEC_SHELL_NETWORK). */
  network: boolean;
}

/** What a workspace needs of its turn. */
export interface WorkspaceTurn {
  store: ChatStore;
  chatKey: string;
  fence: string;
  runId: string;
  logger: Logger;
  /** Told when the save is refused by the fence: another turn holds the chat. */
  fencedOut: (reason: string) => void;
}

/** How long archiving or restoring a workspace may take (a few MB: well under a second). */
const ARCHIVE_TIMEOUT_MS = 30_000;

/** What became of a command's changes to the workspace. */
export type WorkspaceOutcome = 'saved' | 'unchanged' | 'empty' | 'over-limit' | 'not-saved';

export interface ShellRun extends CommandResult {
  workspace: WorkspaceOutcome;
  /** On the turn's first command: why the saved workspace was restored only in part, if so. */
  restoreProblem?: string;
  /** Bytes of the workspace as archived (tar, before compression), when it was archived. */
  workspaceBytes?: number;
}

export class WorkspaceError extends Error {
  override name = 'WorkspaceError';
}

/**
 * One turn's view of its chat's workspace. Nothing happens until the turn first uses the
 * shell: then a directory is made and the chat's saved workspace (Redis, `workspace`) is
 * restored into it. Every command runs in the sandbox over it, one at a time; after each, the
 * workspace is archived and, if it changed and fits EXEC_SHELL_WORKSPACE_MAX_BYTES, saved
 * under the turn's fence. `close` (at the turn's end) deletes the directory.
 *
 * Saved after each command, not with the turn's commit: the model is told what the command
 * did, and a later turn (on any worker) finds the workspace as the command left it, even when
 * this turn fails before its commit (a retried turn's repeated command runs on that state, as
 * every tool's side effect is at least once). The commit script stays as it is, and turns
 * that never use the shell pay nothing.
 */
export class ChatWorkspace {
  private dir: string | undefined;
  private opening: Promise<string> | undefined;
  /** The archive hash of what is saved now (undefined: nothing saved yet). */
  private savedHash: string | undefined;
  private queue: Promise<unknown> = Promise.resolve();
  private closed = false;
  /** Said once, with the first command's result. */
  private restoreProblem: string | undefined;

  constructor(
    private readonly host: WorkspaceHost,
    private readonly turn: WorkspaceTurn,
  ) {}

  /** Run `command` (one at a time per turn), then save the workspace if it changed. */
  run(
    command: string,
    signal?: AbortSignal,
    opts: Pick<CommandOptions, 'cwd' | 'env'> = {},
  ): Promise<ShellRun> {
    return this.enqueue(() => this.runNow(command, signal, opts));
  }

  /**
   * Any other sandboxed step over the workspace (the AI SDK sandbox session's file reads and
   * writes, its spawned processes), in the same line as the commands; a step that `mutates`
   * is followed by a save, as a command is.
   */
  use<T>(
    step: (dir: string) => Promise<T>,
    opts: { mutates: boolean; signal?: AbortSignal | undefined },
  ): Promise<T> {
    return this.enqueue(async () => {
      const dir = await this.open();
      const out = await step(dir);
      if (opts.mutates && !opts.signal?.aborted) await this.save(dir);
      return out;
    });
  }

  private enqueue<T>(step: () => Promise<T>): Promise<T> {
    const next = this.queue.then(step);
    this.queue = next.catch(() => undefined);
    return next;
  }

  /** What every step of this workspace runs in. */
  get sandbox(): WorkspaceHost {
    return this.host;
  }

  private async runNow(
    command: string,
    signal: AbortSignal | undefined,
    opts: Pick<CommandOptions, 'cwd' | 'env'>,
  ): Promise<ShellRun> {
    const dir = await this.open();
    const result = await runCommand(this.host.spec, {
      workspace: dir,
      command,
      timeoutMs: this.host.timeoutMs,
      outputMaxBytes: this.host.outputMaxBytes,
      signal,
      network: this.host.network,
      ...opts,
    });
    const problem = this.restoreProblem;
    this.restoreProblem = undefined;
    const run = { ...result, ...(problem && { restoreProblem: problem }) };
    // The turn was ended (its lane lost or stopped): its fence cannot save anyway.
    if (result.aborted) return { ...run, workspace: 'not-saved' };
    return { ...run, ...(await this.save(dir)) };
  }

  /** The workspace directory, restored on first use. */
  private open(): Promise<string> {
    if (this.closed) return Promise.reject(new WorkspaceError('the turn has ended'));
    this.opening ??= this.restore();
    return this.opening;
  }

  private async restore(): Promise<string> {
    const { spec } = this.host;
    const dir = await mkdtemp(join(this.host.root, 'ws-'));
    this.dir = dir;
    if (spec.uid !== undefined) await chown(dir, spec.uid, spec.uid);
    await chmod(dir, 0o700);
    const saved = await readWorkspace(this.turn.store, this.turn.chatKey);
    if (saved) {
      const restored = await restoreWorkspace(spec, dir, saved, {
        maxBytes: this.host.workspaceMaxBytes,
        timeoutMs: ARCHIVE_TIMEOUT_MS,
      });
      // Not restored whole: whatever the next archive holds is saved over it ('' never matches).
      this.savedHash = restored.hash ?? '';
      if (restored.problem) {
        this.restoreProblem = restored.problem;
        this.turn.logger.warn(
          { problem: restored.problem },
          'exec_shell: the saved workspace was restored only in part',
        );
      }
    }
    return dir;
  }

  private async save(dir: string): Promise<{ workspace: WorkspaceOutcome; workspaceBytes?: number }> {
    // A chat that never had a workspace and still has nothing in it: nothing to archive.
    if (this.savedHash === undefined && (await readdir(dir)).length === 0) return { workspace: 'empty' };
    let archived: Archived;
    try {
      archived = await archiveWorkspace(this.host.spec, dir, {
        maxBytes: this.host.workspaceMaxBytes,
        timeoutMs: ARCHIVE_TIMEOUT_MS,
      });
    } catch (err) {
      this.turn.logger.warn({ err }, 'exec_shell: workspace archive failed');
      return { workspace: 'not-saved' };
    }
    if (archived.overLimit || !archived.archive)
      return { workspace: 'over-limit', workspaceBytes: archived.bytes };
    if (archived.hash === this.savedHash) return { workspace: 'unchanged', workspaceBytes: archived.bytes };
    const saved = await saveWorkspace(this.turn.store, this.turn.chatKey, {
      fence: this.turn.fence,
      runId: this.turn.runId,
      archive: archived.archive,
      bytes: archived.bytes,
    });
    if (saved === 'fenced-out') {
      this.turn.fencedOut('workspace save fenced out');
      return { workspace: 'not-saved' };
    }
    this.savedHash = archived.hash;
    return { workspace: 'saved', workspaceBytes: archived.bytes };
  }

  /** Delete the directory (the saved workspace stays in Redis). Idempotent; never throws. */
  async close(): Promise<void> {
    if (this.closed) return;
    this.closed = true;
    await this.queue;
    await this.opening?.catch(() => undefined);
    if (this.dir) await removeWorkspaceDir(this.host.spec, this.dir, this.turn.logger);
  }
}

/**
 * Remove a workspace directory. A command may have left directories its owner cannot write
 * (chmod 555): a worker that is not root then makes them writable from inside the sandbox
 * first, as the files' owner.
 */
export async function removeWorkspaceDir(spec: SandboxSpec, dir: string, logger: Logger): Promise<void> {
  try {
    await rm(dir, { recursive: true, force: true });
    return;
  } catch {
    // Below: make it writable, then again.
  }
  try {
    const child = spawnSandboxed(spec, { workspace: dir, argv: ['chmod', '-R', 'u+rwX', '.'] });
    child.stdout!.resume();
    child.stderr!.resume();
    await settle(child, { timeoutMs: ARCHIVE_TIMEOUT_MS });
    await rm(dir, { recursive: true, force: true });
  } catch (err) {
    logger.warn({ err, dir }, 'exec_shell: a workspace directory could not be removed');
  }
}

import { tool } from 'ai';
import { z } from 'zod';
import { type ExecShellToolSettings, mb, sandboxTerms } from '../../shell/exec-shell.js';
import type { ShellRun } from '../../shell/workspace.js';
import { toolInput } from './input.js';
import { turnOf } from './tool-turn.js';

// Built once; a command longer than this is a tool error the model can shorten.
const INPUT = toolInput(z.object({ command: z.string().min(1).max(16_000) }));

/** What the model gets back from one command. */
export interface ExecShellOutput {
  /** The command's exit code (128 + n: ended by signal n); null when it was killed. */
  exitCode: number | null;
  stdout: string;
  stderr: string;
  /** Present when the command was killed (time limit). */
  killed?: string;
  /** Present when the workspace's changes were not saved for later turns. */
  workspace?: string;
}

/**
 * `exec_shell` (EXEC_SHELL=on): `bash -c command` in the sandbox over this chat's workspace
 * (src/worker/shell). A plain AI SDK tool whose execute does the work: tool approval can wrap
 * it without changing it. Built once per process; the turn (and its workspace) comes with
 * each call (tool-turn.ts).
 */
export function createExecShellTool(settings: ExecShellToolSettings) {
  return tool({
    // Offered on every turn, so in every model request: no word more than its meaning needs.
    description:
      `Run a shell command (bash -c) in /workspace, this chat's own directory, kept between turns ` +
      `(up to ${mb(settings.workspaceMaxBytes)}). Sandboxed: ${sandboxTerms(settings)}, ` +
      `output cut to ${settings.outputMaxBytes} bytes each. Returns exitCode, stdout, stderr.`,
    inputSchema: INPUT,
    execute: async ({ command }, options): Promise<ExecShellOutput> => {
      const turn = turnOf(options);
      if (!turn.workspace) throw new Error('exec_shell is not available in this turn');
      const run = await turn.workspace.run(command, options.abortSignal);
      if (run.aborted) throw options.abortSignal?.reason ?? new Error('the turn ended');
      return outputOf(run, settings);
    },
  });
}

export function outputOf(
  run: ShellRun,
  settings: Pick<ExecShellToolSettings, 'timeoutMs' | 'workspaceMaxBytes'>,
): ExecShellOutput {
  const out: ExecShellOutput = { exitCode: run.exitCode, stdout: run.stdout, stderr: run.stderr };
  if (run.timedOut)
    out.killed = `timed out after ${settings.timeoutMs} ms: every process of the command was killed`;
  const notes: string[] = [];
  if (run.restoreProblem) notes.push(`the saved workspace was restored only in part (${run.restoreProblem})`);
  if (run.workspace === 'over-limit')
    notes.push(
      `not saved: the workspace is over its ${mb(settings.workspaceMaxBytes)} limit; ` +
        'remove files to keep it, or later turns start from its last saved state',
    );
  else if (run.workspace === 'not-saved')
    notes.push('not saved: the workspace could not be archived; later turns start from its last saved state');
  if (notes.length > 0) out.workspace = notes.join('; ');
  return out;
}

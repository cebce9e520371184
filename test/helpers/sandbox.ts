import { readdirSync, readFileSync, readlinkSync } from 'node:fs';
import { loadConfig } from '../../src/shared/config.js';
import { silentLogger } from '../../src/shared/logger.js';
import type { ChatStore } from '../../src/shared/store/chat-store.js';
import { type ExecShell, openExecShell } from '../../src/worker/shell/exec-shell.js';
import { findBwrap } from '../../src/worker/shell/sandbox.js';
import type { ChatWorkspace } from '../../src/worker/shell/workspace.js';

/**
 * exec_shell's tests need bubblewrap. CI installs it and sets CHATLANE_TEST_SANDBOX=required,
 * so there a missing sandbox fails the tests instead of skipping them; elsewhere they are
 * skipped without bwrap (`apt-get install bubblewrap`).
 */
export const haveSandbox = findBwrap() !== undefined || process.env.CHATLANE_TEST_SANDBOX === 'required';

/** A worker's exec_shell as `openExecShell` makes it, from EXEC_SHELL=on and `env`. */
export async function openTestShell(env: Record<string, string> = {}): Promise<ExecShell> {
  const shell = await openExecShell(loadConfig({ EXEC_SHELL: 'on', ...env }), silentLogger());
  if (!shell) throw new Error('EXEC_SHELL=on gave no shell');
  return shell;
}

/** A turn's workspace of `chatKey` whose fence is the chat's current one (set here). */
export async function turnWorkspace(
  shell: ExecShell,
  store: ChatStore,
  chatKey: string,
  opts: { fence?: string; onFencedOut?: (reason: string) => void } = {},
): Promise<ChatWorkspace> {
  const fence = opts.fence ?? '7';
  if (opts.fence === undefined) await store.redis.hset(store.keys(chatKey).meta, 'fence', fence);
  return shell.workspace({
    store,
    chatKey,
    fence,
    runId: `run-${fence}`,
    logger: silentLogger(),
    fencedOut: opts.onFencedOut ?? (() => undefined),
  });
}

/** The user namespace of a host process (`user:[inode]`), or undefined when it is gone. */
export function userNamespaceOf(pid: number | string): string | undefined {
  try {
    return readlinkSync(`/proc/${pid}/ns/user`);
  } catch {
    return undefined;
  }
}

/** Whether a host process has exited (a zombie its parent has not reaped yet counts as gone). */
function exited(pid: number | string): boolean {
  try {
    const stat = readFileSync(`/proc/${pid}/stat`, 'utf8');
    return stat.slice(stat.lastIndexOf(')') + 2).startsWith('Z');
  } catch {
    return true;
  }
}

/** Live host processes whose user namespace is `ns`. */
export function processesIn(ns: string): number[] {
  const pids: number[] = [];
  for (const name of readdirSync('/proc')) {
    if (!/^\d+$/.test(name)) continue;
    if (userNamespaceOf(name) === ns && !exited(name)) pids.push(Number(name));
  }
  return pids;
}

/** Live host processes descending from `root` (its children, theirs, ...), `root` excluded. */
export function descendantsOf(root: number): number[] {
  const children = new Map<number, number[]>();
  for (const name of readdirSync('/proc')) {
    if (!/^\d+$/.test(name)) continue;
    let stat: string;
    try {
      stat = readFileSync(`/proc/${name}/stat`, 'utf8');
    } catch {
      continue;
    }
    const [state, ppid] = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
    if (state === 'Z') continue;
    const list = children.get(Number(ppid)) ?? [];
    list.push(Number(name));
    children.set(Number(ppid), list);
  }
  const out: number[] = [];
  const walk = (pid: number) => {
    for (const child of children.get(pid) ?? []) {
      out.push(child);
      walk(child);
    }
  };
  walk(root);
  return out;
}

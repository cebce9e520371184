import { chmodSync, existsSync, mkdtempSync, readdirSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { ChatStore } from '../../src/shared/store/chat-store.js';
import { outputOf } from '../../src/worker/agent/tools/exec-shell.js';
import type { ExecShell } from '../../src/worker/shell/exec-shell.js';
import { deleteLabel, randomPrefix, testRedis } from '../helpers/redis.js';
import { haveSandbox, openTestShell, turnWorkspace } from '../helpers/sandbox.js';

/**
 * A chat's workspace in Redis: restored by whichever worker's turn first uses the shell, saved
 * after each command that changed it, only under the turn's fence, never past its cap. Two
 * ExecShells stand for two worker processes (each its own directory on disk).
 */
const LABEL = 'shell-ws';

describe.skipIf(!haveSandbox)('exec_shell workspace', () => {
  const redis = testRedis();
  const store = new ChatStore(redis, { prefix: randomPrefix(LABEL), maxEvents: 100 });
  let workerA: ExecShell;
  let workerB: ExecShell;
  const saves = async (chatKey: string) =>
    (await store.readEvents(chatKey, undefined, 100)).filter((e) => e.type === 'workspace.saved');

  beforeAll(async () => {
    const env = { EXEC_SHELL_TIMEOUT_MS: '10000', EXEC_SHELL_WORKSPACE_MAX_BYTES: String(256 * 1024) };
    workerA = await openTestShell(env);
    workerB = await openTestShell(env);
  });

  afterAll(async () => {
    await workerA?.close();
    await workerB?.close();
    await deleteLabel(redis, LABEL);
    redis.disconnect();
  });

  it("is saved after a command and restored by another worker's turn, files, modes and links intact", async () => {
    const first = await turnWorkspace(workerA, store, 'ws-persist');
    const made = await first.run(
      'mkdir -p src && echo "print(42)" > src/main.py && printf "#!/bin/sh\\necho run\\n" > run.sh && chmod 755 run.sh && ln -s src/main.py main',
    );
    expect(made).toMatchObject({ exitCode: 0, workspace: 'saved' });
    await first.close();
    expect(readdirSync(workerA.root).filter((n) => n.startsWith('ws-'))).toEqual([]); // gone from disk

    const second = await turnWorkspace(workerB, store, 'ws-persist', { fence: '8' });
    await redis.hset(store.keys('ws-persist').meta, 'fence', '8');
    const read = await second.run('cat src/main.py; ./run.sh; readlink main; pwd');
    await second.close();
    expect(read.exitCode).toBe(0);
    expect(read.stdout).toBe('print(42)\nrun\nsrc/main.py\n/workspace\n');
    // Nothing changed: nothing written.
    expect(read.workspace).toBe('unchanged');
    expect(await saves('ws-persist')).toHaveLength(1);
  });

  it('writes nothing for a chat that never had a workspace and still has nothing in it', async () => {
    const ws = await turnWorkspace(workerA, store, 'ws-empty');
    const run = await ws.run('echo hello');
    await ws.close();
    expect(run).toMatchObject({ exitCode: 0, stdout: 'hello\n', workspace: 'empty' });
    expect(await redis.exists(store.keys('ws-empty').workspace)).toBe(0);
  });

  it('keeps the commands of one turn in order on one directory, saving after each that changed it', async () => {
    const ws = await turnWorkspace(workerA, store, 'ws-turn');
    const runs = await Promise.all([ws.run('echo 1 >> log'), ws.run('echo 2 >> log'), ws.run('cat log')]);
    await ws.close();
    expect(runs.map((r) => r.workspace)).toEqual(['saved', 'saved', 'unchanged']);
    expect(runs[2]!.stdout).toBe('1\n2\n');
  });

  it('over EXEC_SHELL_WORKSPACE_MAX_BYTES: the result says so and the saved workspace stays as it was', async () => {
    const ws = await turnWorkspace(workerA, store, 'ws-big');
    await ws.run('echo small > keep');
    const before = await redis.getBuffer(store.keys('ws-big').workspace);
    const big = await ws.run('head -c 300000 /dev/urandom > big');
    await ws.close();
    expect(big.workspace).toBe('over-limit');
    expect(outputOf(big, { timeoutMs: 10_000, workspaceMaxBytes: 256 * 1024 }).workspace).toBe(
      'not saved: the workspace is over its 0.3 MB limit; remove files to keep it, or later turns start from its last saved state',
    );
    expect(await redis.getBuffer(store.keys('ws-big').workspace)).toEqual(before);

    const next = await turnWorkspace(workerB, store, 'ws-big');
    const after = await next.run('ls');
    await next.close();
    expect(after.stdout).toBe('keep\n');
  });

  it('a file past the cap is cut by RLIMIT_FSIZE, and /tmp is capped too', async () => {
    const ws = await turnWorkspace(workerA, store, 'ws-fsize');
    const run = await ws.run(
      'head -c 400000 /dev/zero > f; echo "exit $?"; head -c 400000 /dev/zero > /tmp/t; echo "exit $?"; ls -l f /tmp/t',
    );
    await ws.close();
    expect(run.stdout).toMatch(/exit 153/); // SIGXFSZ
    expect(run.stdout).toMatch(/ 262144 .* f\n/);
  });

  it('is not saved by a turn whose fence is stale, which learns it has lost the chat', async () => {
    await redis.hset(store.keys('ws-fence').meta, 'fence', '12');
    const lost: string[] = [];
    const stale = await turnWorkspace(workerA, store, 'ws-fence', {
      fence: '11',
      onFencedOut: (r) => lost.push(r),
    });
    const run = await stale.run('echo late > file');
    await stale.close();
    expect(run.workspace).toBe('not-saved');
    expect(lost).toEqual(['workspace save fenced out']);
    expect(await redis.exists(store.keys('ws-fence').workspace)).toBe(0);
    const rejected = (await store.readEvents('ws-fence', undefined, 10)).find(
      (e) => e.type === 'fence.rejected',
    );
    expect(rejected?.data).toMatchObject({ op: 'workspace', fence: '11', current: '12' });
  });

  it('a turn ended mid-command (its abort signal) kills the command and saves nothing', async () => {
    const ws = await turnWorkspace(workerA, store, 'ws-abort');
    const ended = new AbortController();
    const running = ws.run('echo started > f; sleep 600', ended.signal);
    setTimeout(() => ended.abort(new Error('lane lost')), 500);
    const run = await running;
    await ws.close();
    expect(run).toMatchObject({ aborted: true, timedOut: false, exitCode: null, workspace: 'not-saved' });
    expect(await redis.exists(store.keys('ws-abort').workspace)).toBe(0);
  });

  it('a turn that ended refuses further commands, and its directory is gone', async () => {
    const ws = await turnWorkspace(workerA, store, 'ws-closed');
    await ws.run('echo a > a');
    await ws.close();
    await expect(ws.run('ls')).rejects.toThrow('the turn has ended');
    expect(readdirSync(workerA.root).filter((n) => n.startsWith('ws-'))).toEqual([]);
  });

  it('mounts EXEC_SHELL_READONLY_DIRS read-only at the same path', async () => {
    const repo = mkdtempSync(join(tmpdir(), 'chatlane-ro-repo-'));
    chmodSync(repo, 0o755);
    writeFileSync(join(repo, 'README'), 'the repository\n');
    const shell = await openTestShell({ EXEC_SHELL_READONLY_DIRS: repo });
    try {
      const ws = await turnWorkspace(shell, store, 'ws-readonly');
      const run = await ws.run(
        `cat ${repo}/README; echo x > ${repo}/new; cp ${repo}/README copy && cat copy`,
      );
      await ws.close();
      expect(run.stdout).toBe('the repository\nthe repository\n');
      expect(run.stderr).toMatch(/Read-only file system/);
      expect(existsSync(join(repo, 'new'))).toBe(false);
    } finally {
      await shell.close();
      rmSync(repo, { recursive: true });
    }
  });

  it('refuses at start a read-only directory the sandbox user cannot read, naming the variable', async () => {
    const locked = mkdtempSync(join(tmpdir(), 'chatlane-ro-locked-'));
    chmodSync(locked, 0o000);
    try {
      await expect(openTestShell({ EXEC_SHELL_READONLY_DIRS: locked })).rejects.toThrow(
        `EXEC_SHELL_READONLY_DIRS: ${locked} is not readable by the sandbox user; exec_shell never runs a command unsandboxed`,
      );
    } finally {
      rmSync(locked, { recursive: true });
    }
  });

  it('a directory a command made unwritable is still removed at the turn end', async () => {
    const ws = await turnWorkspace(workerA, store, 'ws-ro');
    await ws.run('mkdir -p locked/inner && echo x > locked/inner/f && chmod 555 locked/inner locked');
    await ws.close();
    expect(readdirSync(workerA.root).filter((n) => n.startsWith('ws-'))).toEqual([]);
    expect(existsSync(workerA.root)).toBe(true);
  });
});

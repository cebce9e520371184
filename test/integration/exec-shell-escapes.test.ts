import { spawnSync } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { existsSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { gzipSync } from 'node:zlib';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { ChatStore } from '../../src/shared/store/chat-store.js';
import { outputOf } from '../../src/worker/agent/tools/exec-shell.js';
import type { ExecShell } from '../../src/worker/shell/exec-shell.js';
import { deleteLabel, randomPrefix, testRedis, waitFor } from '../helpers/redis.js';
import {
  descendantsOf,
  haveSandbox,
  openTestShell,
  processesIn,
  turnWorkspace,
  userNamespaceOf,
} from '../helpers/sandbox.js';

/**
 * Each way out of the sandbox a command might try, run through a turn's workspace exactly as
 * exec_shell runs it; every one must fail. The worker in these tests runs as root on CI and
 * on the development VM, which is the harder case (root owns /etc/shadow and ignores
 * RLIMIT_NPROC).
 */
const LABEL = 'shell-escape';

/** Live processes this test started in a sandbox: its descendants in another user namespace. */
function sandboxProcesses(): Array<{ pid: number; ns: string }> {
  const own = userNamespaceOf(process.pid);
  return descendantsOf(process.pid)
    .map((pid) => ({ pid, ns: userNamespaceOf(pid) }))
    .filter((p): p is { pid: number; ns: string } => p.ns !== undefined && p.ns !== own);
}
const SECRET = `sk-test-${randomBytes(8).toString('hex')}`;

describe.skipIf(!haveSandbox)('exec_shell sandbox escapes', () => {
  const redis = testRedis();
  const store = new ChatStore(redis, { prefix: randomPrefix(LABEL), maxEvents: 100 });
  let shell: ExecShell;
  let chat = 0;
  const workspace = () => turnWorkspace(shell, store, `escape-${++chat}`);

  beforeAll(async () => {
    // As an API key in the worker's environment: the sandbox must not see it.
    process.env.CHATLANE_TEST_SANDBOX_SECRET = SECRET;
    shell = await openTestShell({
      EXEC_SHELL_TIMEOUT_MS: '3000',
      EXEC_SHELL_MAX_PROCESSES: '32',
      EXEC_SHELL_OUTPUT_MAX_BYTES: '4096',
    });
  });

  afterAll(async () => {
    delete process.env.CHATLANE_TEST_SANDBOX_SECRET;
    await shell?.close();
    await deleteLabel(redis, LABEL);
    redis.disconnect();
  });

  it('cannot read /etc/shadow', async () => {
    expect(readFileSync('/etc/shadow', 'utf8')).toMatch(/^root:/m); // the worker can
    const ws = await workspace();
    const run = await ws.run(
      'cat /etc/shadow; grep -r "^root:" /etc/shadow /etc/shadow- /etc/gshadow 2>&1; echo end',
    );
    await ws.close();
    expect(run.stdout).not.toMatch(/root:/);
    expect(run.stdout + run.stderr).toMatch(/\/etc\/shadow: Permission denied|No such file/);
  });

  it("cannot read the worker's environment: not in its own, not in /proc/1 or its parent's", async () => {
    expect(process.env.CHATLANE_TEST_SANDBOX_SECRET).toBe(SECRET);
    const ws = await workspace();
    const run = await ws.run(
      [
        'env',
        'cat /proc/1/environ; echo',
        'cat /proc/$PPID/environ; echo',
        'for f in /proc/[0-9]*/environ; do cat "$f"; echo; done',
        'cat /proc/1/cmdline; echo',
        'ls /proc | grep -c "^[0-9]"',
      ].join('\n'),
    );
    await ws.close();
    expect(run.exitCode).toBe(0);
    expect(run.stdout).toContain('HOME=/workspace');
    expect(run.stdout + run.stderr).not.toContain(SECRET);
    expect(run.stdout).not.toMatch(/REDIS_URL|CHATLANE_|LLM_/);
    // Its own PID namespace: a handful of processes, none of the host's.
    expect(Number(run.stdout.trim().split('\n').at(-1))).toBeLessThan(10);
  });

  it("cannot write the host's /tmp, nor read what is there", async () => {
    const mark = `chatlane-escape-${randomBytes(6).toString('hex')}`;
    const visible = join(tmpdir(), `${mark}-host`);
    writeFileSync(visible, 'host file');
    const ws = await workspace();
    const run = await ws.run(`echo pwned > /tmp/${mark}; cat /tmp/${mark}; cat /tmp/${mark}-host; ls /tmp`);
    await ws.close();
    rmSync(visible);
    // The sandbox has a /tmp of its own, writable, holding only what it wrote.
    expect(run.stdout).toContain('pwned');
    expect(run.stdout).not.toContain('host file');
    expect(run.stderr).toContain('No such file');
    expect(existsSync(join(tmpdir(), mark))).toBe(false);
  });

  it('cannot reach Redis on 127.0.0.1:6379 (no network, not even the host loopback)', async () => {
    expect(await redis.ping()).toBe('PONG'); // the worker can
    const ws = await workspace();
    const run = await ws.run(
      [
        'exec 3<>/dev/tcp/127.0.0.1/6379 && { printf "PING\\r\\n" >&3; timeout 2 head -c 7 <&3; echo reached; }',
        'ip -o addr 2>/dev/null || cat /proc/net/dev',
      ].join('\n'),
    );
    await ws.close();
    expect(run.stdout).not.toContain('PONG');
    expect(run.stdout).not.toContain('reached');
    expect(run.stderr).toMatch(/Connection refused|Network is unreachable/);
  });

  it('contains a fork bomb: processes capped, the reply comes back, nothing is left on the host', async () => {
    const ws = await workspace();
    let most = 0;
    const namespaces = new Set<string>();
    const sampler = setInterval(() => {
      // This test's sandboxes: its descendants in a user namespace other than its own.
      const inside = sandboxProcesses();
      most = Math.max(most, inside.length);
      for (const { ns } of inside) namespaces.add(ns);
    }, 100);
    const run = await ws.run('bomb() { bomb | bomb & }; bomb; sleep 1; echo still-here');
    clearInterval(sampler);
    await ws.close();
    // The command ended (by itself or at the time limit) and the tool has a reply.
    expect(run.exitCode === null ? run.timedOut : true).toBe(true);
    expect(run.stderr).toMatch(/fork|Resource temporarily unavailable/);
    // EXEC_SHELL_MAX_PROCESSES=32, counted in the sandbox's user namespace.
    expect(most).toBeLessThanOrEqual(32);
    expect(most).toBeGreaterThan(10);
    // Every one was killed; the kernel finishes their exits on its own, within moments.
    for (const ns of namespaces)
      await waitFor(async () => processesIn(ns).length === 0, {
        what: `no process left in ${ns}`,
        timeoutMs: 10_000,
      });
    expect(await redis.ping()).toBe('PONG');
  });

  it('cuts `sleep 600` at the time limit and says so', async () => {
    const ws = await workspace();
    const started = Date.now();
    const run = await ws.run('sleep 600 & sleep 600; echo never');
    await ws.close();
    expect(run.timedOut).toBe(true);
    expect(run.exitCode).toBeNull();
    expect(run.stdout).not.toContain('never');
    // Far below the sleep: the 3 s limit, with room for a loaded machine.
    expect(Date.now() - started).toBeLessThan(60_000);
    expect(outputOf(run, { timeoutMs: 3000, workspaceMaxBytes: 1 })).toMatchObject({
      exitCode: null,
      killed: 'timed out after 3000 ms: every process of the command was killed',
    });
    await waitFor(async () => sandboxProcesses().length === 0, {
      what: 'no sandbox process left',
      timeoutMs: 10_000,
    });
  });

  it('caps 5 MB of output to EXEC_SHELL_OUTPUT_MAX_BYTES of each stream', async () => {
    const ws = await workspace();
    const run = await ws.run(
      "head -c 5000000 /dev/zero | tr '\\0' a; head -c 5000000 /dev/zero | tr '\\0' b >&2",
    );
    await ws.close();
    expect(run.exitCode).toBe(0);
    expect(Buffer.byteLength(run.stdout)).toBeLessThan(4096 + 100);
    expect(Buffer.byteLength(run.stderr)).toBeLessThan(4096 + 100);
    expect(run.stdoutDropped).toBe(5_000_000 - 4096);
    expect(run.stderrDropped).toBe(5_000_000 - 4096);
    expect(run.stdout).toMatch(/^a{2048}\n\[\.\.\. 4995904 bytes left out \.\.\.\]\na{2048}$/);
  });

  it('a symlink out of the workspace reaches nothing at run time, and stays a link in the saved workspace', async () => {
    const ws = await workspace();
    const run = await ws.run(
      'ln -s /etc/shadow shadow; ln -s / root; ln -s /tmp hosttmp; cat shadow; ls root; ls root/home root/run 2>&1; echo x > hosttmp/written',
    );
    await ws.close();
    expect(run.workspace).toBe('saved');
    expect(run.stdout).not.toMatch(/root:/);
    expect(run.stdout).toMatch(/No such file/); // no /home, no /run in the sandbox
    expect(existsSync(join(tmpdir(), 'written'))).toBe(false);
    // The next turn restores the links as links: still nothing outside.
    const next = await turnWorkspace(shell, store, `escape-${chat}`);
    const again = await next.run('readlink shadow; cat shadow; cat hosttmp/written');
    await next.close();
    expect(again.stdout).toContain('/etc/shadow');
    expect(again.stdout).not.toMatch(/root:/);
    expect(again.stderr).toMatch(/Permission denied/);
    expect(again.stderr).toMatch(/No such file/); // /tmp is the new sandbox's own
  });

  it('a saved workspace whose archive writes through a symlink, up with `..` or to an absolute path writes nothing outside', async () => {
    const target = mkdtempSync(join(tmpdir(), 'chatlane-escape-target-'));
    const build = mkdtempSync(join(tmpdir(), 'chatlane-escape-build-'));
    const abs = join(target, 'absolute');
    const up = `chatlane-up-${randomBytes(6).toString('hex')}`;
    // An archive no sandbox would make: `evil` -> the host directory, then `evil/pwned`;
    // `../../up` and the absolute path, kept as written (-P).
    const tar = (...args: string[]) => {
      const res = spawnSync('tar', args, { cwd: build, encoding: 'utf8' });
      if (res.status !== 0) throw new Error(res.stderr);
    };
    spawnSync('ln', ['-s', target, join(build, 'evil')]);
    tar('-cf', 'a.tar', 'evil');
    rmSync(join(build, 'evil'));
    spawnSync('mkdir', ['-p', join(build, 'evil')]);
    writeFileSync(join(build, 'evil', 'pwned'), 'pwned');
    writeFileSync(join(build, up), 'up');
    writeFileSync(abs, 'absolute');
    tar('-rf', 'a.tar', 'evil/pwned');
    tar('-P', '-rf', 'a.tar', '--transform', `s,^${up}$,../../${up},`, up);
    tar('-P', '-rf', 'a.tar', abs);
    rmSync(abs);
    const chatKey = `escape-${++chat}`;
    await store.redis.set(store.keys(chatKey).workspace, gzipSync(readFileSync(join(build, 'a.tar'))));

    const ws = await turnWorkspace(shell, store, chatKey);
    const run = await ws.run('ls -A; cat evil/pwned');
    await ws.close();
    expect(existsSync(join(target, 'pwned'))).toBe(false);
    expect(existsSync(abs)).toBe(false);
    expect(existsSync(join(tmpdir(), up))).toBe(false);
    expect(existsSync(join(shell.root, up))).toBe(false);
    // tar refuses what it cannot write inside the sandbox; the turn is told, and goes on.
    expect(run.restoreProblem).toMatch(/workspace restore failed/);
    expect(run.stdout).toContain('evil');
    expect(run.stdout).not.toContain('pwned');
    rmSync(target, { recursive: true });
    rmSync(build, { recursive: true });
  });
});

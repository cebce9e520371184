import { anthropic } from '@ai-sdk/anthropic';
import { generateText, isStepCount } from 'ai';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { ChatStore } from '../../src/shared/store/chat-store.js';
import type { ExecShell } from '../../src/worker/shell/exec-shell.js';
import type { WorkspaceSession } from '../../src/worker/shell/sandbox-session.js';
import type { ChatWorkspace } from '../../src/worker/shell/workspace.js';
import { deleteLabel, randomPrefix, testRedis } from '../helpers/redis.js';
import { haveSandbox, openTestShell, turnWorkspace } from '../helpers/sandbox.js';
import { scriptedModel } from '../helpers/scripted-model.js';

/**
 * The chat's workspace as the AI SDK's Experimental_SandboxSession: every method runs inside
 * the sandbox, in line with the turn's commands, and what changes the workspace is saved.
 */
const LABEL = 'shell-session';

describe.skipIf(!haveSandbox)('exec_shell workspace as the AI SDK sandbox session', () => {
  const redis = testRedis();
  const store = new ChatStore(redis, { prefix: randomPrefix(LABEL), maxEvents: 100 });
  let shell: ExecShell;
  let chat = 0;
  let open: ChatWorkspace[] = [];
  const session = async (): Promise<{ s: WorkspaceSession; chatKey: string }> => {
    const chatKey = `session-${++chat}`;
    const ws = await turnWorkspace(shell, store, chatKey);
    open.push(ws);
    return { s: shell.session(ws), chatKey };
  };

  beforeAll(async () => {
    shell = await openTestShell({ EXEC_SHELL_TIMEOUT_MS: '10000' });
  });
  afterAll(async () => {
    for (const ws of open) await ws.close();
    open = [];
    await shell?.close();
    await deleteLabel(redis, LABEL);
    redis.disconnect();
  });

  it('writes and reads files under /workspace, creating directories, and saves the workspace', async () => {
    const { s, chatKey } = await session();
    await s.writeTextFile({ path: 'notes/a.txt', content: 'one\ntwo\nthree\n' });
    expect(await s.readTextFile({ path: 'notes/a.txt' })).toBe('one\ntwo\nthree\n');
    expect(await s.readTextFile({ path: '/workspace/notes/a.txt', startLine: 2, endLine: 3 })).toBe(
      'two\nthree',
    );
    expect(Buffer.from((await s.readBinaryFile({ path: 'notes/a.txt' }))!).toString()).toBe(
      'one\ntwo\nthree\n',
    );
    const stream = await s.readFile({ path: 'notes/a.txt' });
    expect(await new Response(stream).text()).toBe('one\ntwo\nthree\n');
    const saved = (await store.readEvents(chatKey, undefined, 10)).filter(
      (e) => e.type === 'workspace.saved',
    );
    expect(saved).toHaveLength(1);
  });

  it('says null for what does not exist and refuses a directory where a file is meant', async () => {
    const { s } = await session();
    expect(await s.readTextFile({ path: 'missing' })).toBeNull();
    expect(await s.stat({ path: 'missing' })).toBeNull();
    expect(await s.listDirectory({ path: 'missing' })).toBeNull();
    expect(await s.deleteFile({ path: 'missing' })).toBe(false);
    await s.writeTextFile({ path: 'd/f', content: 'x' });
    await expect(s.readTextFile({ path: 'd' })).rejects.toThrow('d is a directory');
    await expect(s.deleteFile({ path: 'd' })).rejects.toThrow('d is a directory');
    await expect(s.writeTextFile({ path: 'd', content: 'x' })).rejects.toThrow('d is a directory');
    await expect(s.listDirectory({ path: 'd/f' })).rejects.toThrow('d/f is not a directory');
  });

  it('stats, lists (links as links) and deletes', async () => {
    const { s } = await session();
    await s.writeTextFile({ path: 'f.txt', content: 'hello' });
    await s.run({ command: 'mkdir sub && ln -s f.txt link' });
    expect(await s.stat({ path: 'f.txt' })).toEqual({ type: 'file', size: 5 });
    expect(await s.stat({ path: 'link' })).toEqual({ type: 'file', size: 5 });
    expect((await s.stat({ path: 'sub' }))?.type).toBe('directory');
    const entries = (await s.listDirectory({ path: '.' }))!.sort((a, b) => a.name.localeCompare(b.name));
    expect(entries).toEqual([
      { name: 'f.txt', type: 'file' },
      { name: 'link', type: 'symlink' },
      { name: 'sub', type: 'directory' },
    ]);
    expect(await s.deleteFile({ path: 'link' })).toBe(true);
    expect(await s.stat({ path: 'f.txt' })).not.toBeNull();
  });

  it('runs commands in a working directory with variables, and spawns with stdin', async () => {
    const { s } = await session();
    await s.writeTextFile({ path: 'sub/x', content: '' });
    expect(
      await s.run({ command: 'pwd; echo "$GREETING"', workingDirectory: 'sub', env: { GREETING: 'hi' } }),
    ).toEqual({
      exitCode: 0,
      stdout: '/workspace/sub\nhi\n',
      stderr: '',
    });
    const proc = await s.spawn({ command: 'tr a-z A-Z', stdin: true });
    const writer = proc.stdin.getWriter();
    await writer.write(new TextEncoder().encode('shout\n'));
    await writer.close();
    const [out] = await Promise.all([new Response(proc.stdout).text(), new Response(proc.stderr).text()]);
    expect(out).toBe('SHOUT\n');
    expect(await proc.wait()).toEqual({ exitCode: 0 });
  });

  it('resolves paths in the sandbox: a link to /etc/shadow reads nothing, /etc is read-only', async () => {
    const { s } = await session();
    await s.run({ command: 'ln -s /etc/shadow shadow' });
    await expect(s.readTextFile({ path: 'shadow' })).rejects.toThrow(/Permission denied/);
    await expect(s.writeTextFile({ path: '/etc/chatlane-was-here', content: 'x' })).rejects.toThrow(
      /Read-only file system/,
    );
  });

  it("is the sandbox the AI SDK hands its own sandbox tools: Anthropic's bash tool runs there", async () => {
    const { s } = await session();
    const { model } = scriptedModel((_prompt, call) =>
      call === 0
        ? { toolCalls: [{ name: 'bash', input: { command: 'echo from-bash > f; cat f; id -un' } }] }
        : { text: 'done' },
    );
    const result = await generateText({
      model,
      prompt: 'run it',
      tools: { bash: anthropic.tools.bash_20250124({}) },
      experimental_sandbox: s,
      stopWhen: isStepCount(2),
    });
    const output = result.steps[0]!.toolResults[0]!.output as { stdout: string; exitCode: number };
    expect(output.exitCode).toBe(0);
    expect(output.stdout.split('\n')[0]).toBe('from-bash');
    expect(await s.readTextFile({ path: 'f' })).toBe('from-bash\n');
  });
});

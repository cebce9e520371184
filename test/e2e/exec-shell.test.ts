import { describe, expect, it } from 'vitest';
import { postMessage, startRole } from '../helpers/processes.js';
import { waitFor } from '../helpers/redis.js';
import { haveSandbox } from '../helpers/sandbox.js';
import { useStack } from '../helpers/stack.js';

/**
 * exec_shell end to end: real ingress and worker processes, the mock model (a message
 * `$ <command>` makes it call exec_shell, then chat_send the result). Workers are stateless:
 * the workspace a command leaves is found by the next turn on another worker process.
 */
describe.skipIf(!haveSandbox)('exec_shell across worker processes', () => {
  const stack = useStack('e2e-shell', {
    roles: ['ingress'],
    env: { EXEC_SHELL: 'on', EXEC_SHELL_TIMEOUT_MS: '20000' },
  });
  const { store } = stack;

  /** The chat's replies, in order. */
  const replies = async (chatKey: string) =>
    (await store.readOutbox(chatKey, undefined, 50)).map((o) => o.text);

  it('keeps the workspace across two turns on two different worker processes', async () => {
    const first = await stack.start('worker');
    await postMessage(
      stack.ingressUrl(),
      'shell-chat',
      'm1',
      '$ echo "hello from turn one" > note.txt && ls',
    );
    const one = await waitFor(async () => (await replies('shell-chat'))[0], { what: 'the first reply' });
    expect(one).toMatch(/^shell: /);
    expect(JSON.parse(one.slice('shell: '.length))).toEqual({
      exitCode: 0,
      stdout: 'note.txt\n',
      stderr: '',
    });
    await waitFor(async () => (await store.pendingCount('shell-chat')) === 0, { what: 'turn one committed' });
    await first.kill('SIGTERM');

    const second = await stack.start('worker');
    await postMessage(stack.ingressUrl(), 'shell-chat', 'm2', '$ cat note.txt; echo "$HOSTNAME $(id -u)"');
    const two = await waitFor(async () => (await replies('shell-chat'))[1], { what: 'the second reply' });
    const out = JSON.parse(two.slice('shell: '.length)) as { stdout: string };
    expect(out.stdout.split('\n')[0]).toBe('hello from turn one');

    // One save (turn one's); turn two only read it. Each turn's run on its own process.
    await waitFor(async () => (await store.pendingCount('shell-chat')) === 0, { what: 'turn two committed' });
    const events = await store.readEvents('shell-chat', undefined, 100);
    expect(events.filter((e) => e.type === 'workspace.saved')).toHaveLength(1);
    const committed = events.filter((e) => e.type === 'turn.committed').map((e) => e.data.runId);
    expect(new Set(committed).size).toBe(2);
    expect(first.pid).not.toBe(second.pid);
    await second.kill('SIGTERM');
  }, 90_000);

  it('refuses to start a worker whose sandbox cannot run, naming the variable', async () => {
    await expect(
      startRole('worker', { ...stack.env, EXEC_SHELL_READONLY_DIRS: '/nonexistent/chatlane-repo' }),
    ).rejects.toThrow(/EXEC_SHELL_READONLY_DIRS: \/nonexistent\/chatlane-repo is not a directory/);
  }, 60_000);
});

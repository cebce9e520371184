import { chmodSync, existsSync, mkdirSync, mkdtempSync, readdirSync, rmSync, writeFileSync } from 'node:fs';
import { hostname, tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { ConfigError, loadConfig } from '../../src/shared/config.js';
import { silentLogger } from '../../src/shared/logger.js';
import { openExecShell } from '../../src/worker/shell/exec-shell.js';
import { haveSandbox, openTestShell } from '../helpers/sandbox.js';

/**
 * Where the sandbox cannot start, exec_shell is not enabled: the worker stops at start with a
 * ConfigError that says why (it never runs a command unsandboxed). A host without user
 * namespaces is played by a `bwrap` that fails as bubblewrap does there.
 */
describe('exec_shell at worker start', () => {
  const dir = mkdtempSync(join(tmpdir(), 'chatlane-fake-bwrap-'));
  chmodSync(dir, 0o755); // a root worker runs bwrap as nobody
  const shellRoots = () =>
    readdirSync(tmpdir()).filter((n) => n.startsWith('chatlane-shell-') && n.includes(`-${process.pid}-`));
  afterAll(() => rmSync(dir, { recursive: true, force: true }));

  const open = (paths: string[]) =>
    openExecShell(loadConfig({ EXEC_SHELL: 'on' }), silentLogger(), { bwrapPaths: paths }).then(
      () => undefined,
      (err: unknown) => err,
    );

  it('is nothing at all with EXEC_SHELL=off', async () => {
    expect(await openExecShell(loadConfig({}), silentLogger())).toBeUndefined();
  });

  it('refuses to enable without bubblewrap, saying how to install it', async () => {
    const err = await open([join(dir, 'missing')]);
    expect(err).toBeInstanceOf(ConfigError);
    expect((err as Error).message).toBe(
      'EXEC_SHELL=on: bubblewrap is not installed (apt-get install bubblewrap); exec_shell never runs a command unsandboxed',
    );
  });

  it('refuses to enable where bubblewrap cannot make its namespaces, with its reason, and leaves nothing behind', async () => {
    const fake = join(dir, 'bwrap');
    writeFileSync(fake, '#!/bin/sh\necho "bwrap: No permissions to create new namespace" >&2\nexit 1\n');
    chmodSync(fake, 0o755);
    const before = shellRoots();
    const err = await open([fake]);
    expect(err).toBeInstanceOf(ConfigError);
    expect((err as Error).message).toBe(
      'EXEC_SHELL=on: the sandbox cannot start here (bwrap: No permissions to create new namespace); exec_shell never runs a command unsandboxed',
    );
    expect(shellRoots()).toEqual(before);
  });

  it('refuses a read-only directory that does not exist, naming EXEC_SHELL_READONLY_DIRS', async () => {
    const err = await openExecShell(
      loadConfig({ EXEC_SHELL: 'on', EXEC_SHELL_READONLY_DIRS: join(dir, 'nope') }),
      silentLogger(),
    ).catch((e: unknown) => e);
    expect(err).toBeInstanceOf(ConfigError);
    expect((err as Error).message).toBe(`EXEC_SHELL_READONLY_DIRS: ${join(dir, 'nope')} is not a directory`);
  });

  it.skipIf(!haveSandbox)(
    "removes the directory a killed worker of this host left, and only a dead worker's",
    async () => {
      const host = hostname().replace(/[^A-Za-z0-9.-]/g, '_');
      const dead = join(tmpdir(), `chatlane-shell-${host}-4194302-stale`);
      const live = join(tmpdir(), `chatlane-shell-${host}-${process.ppid}-live`);
      const otherHost = join(tmpdir(), 'chatlane-shell-elsewhere-4194302-other');
      for (const d of [dead, live, otherHost]) mkdirSync(join(d, 'ws-x'), { recursive: true });
      try {
        const shell = await openTestShell();
        await shell.close();
        expect(existsSync(dead)).toBe(false);
        expect(existsSync(live)).toBe(true);
        expect(existsSync(otherHost)).toBe(true);
      } finally {
        for (const d of [dead, live, otherHost]) rmSync(d, { recursive: true, force: true });
      }
    },
  );
});

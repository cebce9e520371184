import { chownSync, mkdtempSync, rmSync } from 'node:fs';
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { ResolveAll } from '../../src/shared/address-policy.js';
import { silentLogger } from '../../src/shared/logger.js';
import type { ExecShell } from '../../src/worker/shell/exec-shell.js';
import { NetworkProxy } from '../../src/worker/shell/network-proxy.js';
import { runCommand } from '../../src/worker/shell/run-command.js';
import type { SandboxSpec } from '../../src/worker/shell/sandbox.js';
import { haveSandbox, openTestShell } from '../helpers/sandbox.js';

/**
 * EXEC_SHELL_NETWORK: a command reaches the hosts named, over HTTP(S) through the proxy outside
 * its sandbox, and nothing else. The "internet" here is a local server: the names resolve to
 * 127.0.0.1 and, for the allowed case only, the private-address guard is told to let
 * 127.0.0.1 through; with the guard as deployed, the same name is refused.
 */

/** A workspace directory the sandbox's user owns, in the shell's own directory. */
async function sandboxDir(shell: ExecShell): Promise<string> {
  const dir = mkdtempSync(join(shell.root, 'net-'));
  if (shell.spec.uid !== undefined) chownSync(dir, shell.spec.uid, shell.spec.uid);
  return dir;
}

/** Raw HTTP through the in-sandbox bridge, with bash alone (no curl needed in the sandbox). */
const viaProxy = (request: string) =>
  `exec 3<>/dev/tcp/127.0.0.1/3128 || exit 9; printf '${request}' >&3; timeout 5 cat <&3`;

describe.skipIf(!haveSandbox)('exec_shell network allow-list', () => {
  let server: Server;
  let port = 0;
  let shell: ExecShell;
  const resolveToLoopback: ResolveAll = (_host, _options, callback) =>
    callback(null, [{ address: '127.0.0.1', family: 4 }]);

  beforeAll(async () => {
    server = createServer((req, res) => res.end(`hello from ${req.headers.host} ${req.url}\n`));
    await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
    port = (server.address() as AddressInfo).port;
    // The sandbox as a worker with EXEC_SHELL_NETWORK builds it (the probe checks socat).
    shell = await openTestShell({
      EXEC_SHELL_NETWORK: `allowed.test:${port}`,
      EXEC_SHELL_TIMEOUT_MS: '10000',
    });
  });

  afterAll(async () => {
    await shell?.close();
    await new Promise((resolve) => server?.close(resolve));
  });

  /** Run in a sandbox like `shell`'s, its proxy resolving and guarding as given. */
  async function withProxy(
    guard: { blocked?: (address: string) => string | undefined },
    command: string,
  ): Promise<{ stdout: string; stderr: string }> {
    const proxy = await NetworkProxy.start({
      allowed: [{ host: 'allowed.test', ports: [port] }],
      socketPath: join(shell.root, `test-${Math.random().toString(36).slice(2)}.sock`),
      uid: shell.spec.uid,
      logger: silentLogger(),
      resolve: resolveToLoopback,
      ...guard,
    });
    const spec: SandboxSpec = { ...shell.spec, proxySocket: proxy.socketPath };
    const ws = await sandboxDir(shell);
    try {
      return await runCommand(spec, {
        workspace: ws,
        command,
        timeoutMs: 10_000,
        outputMaxBytes: 8192,
        network: true,
      });
    } finally {
      await proxy.close();
      rmSync(ws, { recursive: true, force: true });
    }
  }

  it('reaches an allowed host by name through the proxy', async () => {
    const run = await withProxy(
      { blocked: () => undefined },
      viaProxy(`GET http://allowed.test:${port}/index HTTP/1.0\\r\\nHost: allowed.test:${port}\\r\\n\\r\\n`),
    );
    expect(run.stdout).toMatch(/^HTTP\/1\.[01] 200/);
    expect(run.stdout).toContain(`hello from allowed.test:${port} /index`);
  });

  it('tunnels CONNECT to an allowed host:port (what https uses)', async () => {
    const run = await withProxy(
      { blocked: () => undefined },
      `exec 3<>/dev/tcp/127.0.0.1/3128; printf 'CONNECT allowed.test:${port} HTTP/1.1\\r\\n\\r\\nGET /tunnel HTTP/1.0\\r\\nHost: x\\r\\n\\r\\n' >&3; timeout 5 cat <&3`,
    );
    expect(run.stdout).toMatch(/^HTTP\/1\.1 200 Connection Established/);
    expect(run.stdout).toContain('hello from x /tunnel');
  });

  it('refuses a host or port that is not on the list, with 403', async () => {
    const run = await withProxy(
      { blocked: () => undefined },
      [
        viaProxy(`GET http://other.test:${port}/ HTTP/1.0\\r\\n\\r\\n`),
        viaProxy(`CONNECT allowed.test:${port + 1} HTTP/1.1\\r\\n\\r\\n`),
        viaProxy('CONNECT 127.0.0.1:6379 HTTP/1.1\\r\\n\\r\\n'),
      ].join('; echo; '),
    );
    expect(run.stdout.match(/403 Forbidden/g)).toHaveLength(3);
    expect(run.stdout).not.toContain('hello from');
  });

  it('refuses an allowed name that resolves to a private address (the guard as deployed)', async () => {
    const run = await withProxy({}, viaProxy(`GET http://allowed.test:${port}/ HTTP/1.0\\r\\n\\r\\n`));
    expect(run.stdout).toMatch(/^HTTP\/1\.1 502/);
    expect(run.stdout).toMatch(/resolves to/);
    expect(run.stdout).not.toContain('hello from');
  });

  it('a client that ignores the proxy reaches nothing, the allowed host included', async () => {
    const ws = await sandboxDir(shell);
    const run = await runCommand(shell.spec, {
      workspace: ws,
      command: `(exec 3<>/dev/tcp/127.0.0.1/${port}) && echo reached; (exec 3<>/dev/tcp/127.0.0.1/3128) && echo bridge`,
      timeoutMs: 10_000,
      outputMaxBytes: 4096,
      network: true,
    });
    rmSync(ws, { recursive: true, force: true });
    expect(run.stdout).toBe('bridge\n'); // only the bridge to the proxy, never the server itself
  });
});

import { chmod, chown, mkdtemp, readdir, rm, stat } from 'node:fs/promises';
import { hostname, tmpdir } from 'node:os';
import { join } from 'node:path';
import { type Config, ConfigError } from '../../shared/config.js';
import type { Logger } from '../../shared/logger.js';
import { NetworkProxy } from './network-proxy.js';
import { runCommand } from './run-command.js';
import { findBwrap, type SandboxSpec, sandboxUid, systemMounts } from './sandbox.js';
import { WorkspaceSession } from './sandbox-session.js';
import { ChatWorkspace, removeWorkspaceDir, type WorkspaceHost, type WorkspaceTurn } from './workspace.js';

/** What exec_shell's description states; the limits themselves are the sandbox's. */
export interface ExecShellToolSettings {
  timeoutMs: number;
  outputMaxBytes: number;
  workspaceMaxBytes: number;
  /** EXEC_SHELL_NETWORK's hosts, as the model may name them. */
  hosts: string[];
}

export const mb = (bytes: number) => `${Math.round((bytes / (1024 * 1024)) * 10) / 10} MB`;

/** What a command may do, in a few words: the tool's and the sandbox session's descriptions. */
export function sandboxTerms(settings: ExecShellToolSettings): string {
  const network =
    settings.hosts.length > 0 ? `no network except HTTP(S) to ${settings.hosts.join(', ')}` : 'no network';
  return `${network}, read-only system, private /tmp, ${Math.round(settings.timeoutMs / 1000)} s limit`;
}

/**
 * exec_shell's part of a worker process: the sandbox (probed once at start), the per-process
 * directory the turns' workspaces are made in, and the allow-list proxy when
 * EXEC_SHELL_NETWORK names hosts. Each turn that uses the shell gets a `ChatWorkspace`.
 */
export class ExecShell implements WorkspaceHost {
  private closing: Promise<void> | undefined;

  constructor(
    readonly spec: SandboxSpec,
    readonly root: string,
    readonly settings: ExecShellToolSettings,
    private readonly proxy: NetworkProxy | undefined,
    private readonly logger: Logger,
  ) {}

  get timeoutMs(): number {
    return this.settings.timeoutMs;
  }
  get outputMaxBytes(): number {
    return this.settings.outputMaxBytes;
  }
  get workspaceMaxBytes(): number {
    return this.settings.workspaceMaxBytes;
  }
  get network(): boolean {
    return this.proxy !== undefined;
  }

  /** What exec_shell's description states. */
  toolSettings(): ExecShellToolSettings {
    return { ...this.settings };
  }

  /**
   * The workspace as the AI SDK's sandbox session (`experimental_sandbox`), for AI SDK tools
   * that run in one: the same sandbox, limits and workspace as exec_shell.
   */
  session(workspace: ChatWorkspace): WorkspaceSession {
    return new WorkspaceSession(
      workspace,
      `A Linux sandbox (bash); its working directory /workspace is this chat's own, kept between turns ` +
        `(up to ${mb(this.settings.workspaceMaxBytes)}). Sandboxed: ${sandboxTerms(this.settings)} per command.`,
    );
  }

  /** A turn's view of its chat's workspace (nothing is made until its first command). */
  workspace(turn: WorkspaceTurn): ChatWorkspace {
    return new ChatWorkspace(this, turn);
  }

  /** Stop the proxy and delete the process's directory. Idempotent. */
  close(): Promise<void> {
    this.closing ??= (async () => {
      await this.proxy
        ?.close()
        .catch((err: unknown) => this.logger.warn({ err }, 'exec_shell proxy close failed'));
      await removeWorkspaceDir(this.spec, this.root, this.logger);
    })();
    return this.closing;
  }
}

/**
 * The per-process directory's name: `chatlane-shell-<host>-<pid>-<random>`. The host name keeps
 * a worker from judging another container's directory (another PID namespace) by pid.
 */
const rootPrefix = () => `chatlane-shell-${hostname().replace(/[^A-Za-z0-9.-]/g, '_')}-`;

/**
 * EXEC_SHELL=on: find bubblewrap, check EXEC_SHELL_READONLY_DIRS, start the proxy, and probe
 * the sandbox once with the very arguments every command gets. Anything missing is a
 * ConfigError naming the variable (the worker does not start): exec_shell never runs a
 * command unsandboxed. EXEC_SHELL=off: undefined (approve opens it like on: the approval is the turn's).
 */
export async function openExecShell(
  config: Config,
  logger: Logger,
  opts: { bwrapPaths?: readonly string[] } = {},
): Promise<ExecShell | undefined> {
  if (config.EXEC_SHELL === 'off') return undefined;
  for (const dir of config.EXEC_SHELL_READONLY_DIRS) {
    const st = await stat(dir).catch(() => undefined);
    if (!st?.isDirectory()) throw new ConfigError(`EXEC_SHELL_READONLY_DIRS: ${dir} is not a directory`);
  }
  const bwrap = findBwrap(opts.bwrapPaths);
  if (!bwrap)
    throw new ConfigError(
      `EXEC_SHELL=${config.EXEC_SHELL}: bubblewrap is not installed (apt-get install bubblewrap); exec_shell never runs a command unsandboxed`,
    );
  await removeStaleRoots(logger);
  const root = await mkdtemp(join(tmpdir(), `${rootPrefix()}${process.pid}-`));
  // Others may pass through (bwrap runs as nobody for a root worker) but not list it.
  await chmod(root, 0o711);
  const uid = sandboxUid();
  const spec: SandboxSpec = {
    bwrap,
    uid,
    systemMounts: systemMounts(),
    readonlyDirs: config.EXEC_SHELL_READONLY_DIRS,
    limits: {
      processes: config.EXEC_SHELL_MAX_PROCESSES,
      memoryBytes: config.EXEC_SHELL_MEMORY_MAX_BYTES,
      fileBytes: config.EXEC_SHELL_WORKSPACE_MAX_BYTES,
    },
  };
  let proxy: NetworkProxy | undefined;
  try {
    if (config.EXEC_SHELL_NETWORK.length > 0) {
      proxy = await NetworkProxy.start({
        allowed: config.EXEC_SHELL_NETWORK,
        socketPath: join(root, 'proxy.sock'),
        uid,
        logger,
      });
      spec.proxySocket = proxy.socketPath;
    }
    const shell = new ExecShell(
      spec,
      root,
      {
        timeoutMs: config.EXEC_SHELL_TIMEOUT_MS,
        outputMaxBytes: config.EXEC_SHELL_OUTPUT_MAX_BYTES,
        workspaceMaxBytes: config.EXEC_SHELL_WORKSPACE_MAX_BYTES,
        hosts: config.EXEC_SHELL_NETWORK.map((a) =>
          a.ports.join() === '80,443' ? a.host : `${a.host}:${a.ports.join('/')}`,
        ),
      },
      proxy,
      logger,
    );
    await probe(shell, config.EXEC_SHELL);
    logger.info(
      {
        bwrap,
        sandboxUid: uid ?? process.getuid?.(),
        network: config.EXEC_SHELL_NETWORK.map((a) => a.host),
        readonlyDirs: config.EXEC_SHELL_READONLY_DIRS,
      },
      'exec_shell: sandbox ready',
    );
    return shell;
  } catch (err) {
    await proxy?.close().catch(() => undefined);
    await rm(root, { recursive: true, force: true }).catch(() => undefined);
    throw err;
  }
}

/**
 * What the probe checks inside a sandbox built like every command's: the workspace is
 * writable and the root is not, /etc/shadow cannot be read, the read-only directories can,
 * and socat is there to bridge to the proxy.
 */
const PROBE = [
  'set -u',
  'touch /workspace/.probe || { echo "the workspace is not writable"; exit 3; }',
  'touch /.probe 2>/dev/null && { echo "the root is writable"; exit 3; }',
  'cat /etc/shadow >/dev/null 2>&1 && { echo "/etc/shadow is readable"; exit 3; }',
  'printf "%s\\n" "$CHATLANE_PROBE_DIRS" | while IFS= read -r d; do',
  '  [ -z "$d" ] || test -r "$d" -a -x "$d" || { echo "EXEC_SHELL_READONLY_DIRS: $d is not readable by the sandbox user"; exit 4; }',
  'done || exit 4',
  'if [ "$CHATLANE_PROBE_SOCAT" = 1 ] && ! command -v socat >/dev/null; then',
  '  echo "EXEC_SHELL_NETWORK: socat is not installed (apt-get install socat), it bridges the sandbox to the proxy"; exit 5',
  'fi',
  'echo ok',
].join('\n');

async function probe(shell: ExecShell, mode: string): Promise<void> {
  const dir = await mkdtemp(join(shell.root, 'probe-'));
  try {
    if (shell.spec.uid !== undefined) await chown(dir, shell.spec.uid, shell.spec.uid);
    const res = await runCommand(shell.spec, {
      workspace: dir,
      command: PROBE,
      timeoutMs: 10_000,
      outputMaxBytes: 4096,
      network: false,
      env: {
        CHATLANE_PROBE_DIRS: shell.spec.readonlyDirs.join('\n'),
        CHATLANE_PROBE_SOCAT: shell.network ? '1' : '0',
      },
    });
    if (res.exitCode !== 0 || res.stdout.trim() !== 'ok') {
      const why = (res.stdout.trim() || res.stderr.trim() || `exit ${res.exitCode}`).slice(0, 500);
      // The probe names the variable to fix when it is one of the operator's (a directory, socat).
      throw new ConfigError(
        /^EXEC_SHELL_[A-Z_]+: /.test(why)
          ? `${why}; exec_shell never runs a command unsandboxed`
          : `EXEC_SHELL=${mode}: the sandbox cannot start here (${why}); exec_shell never runs a command unsandboxed`,
      );
    }
  } finally {
    await rm(dir, { recursive: true, force: true });
  }
}

/** Directories of worker processes that are gone (a killed worker leaves its own behind). */
async function removeStaleRoots(logger: Logger): Promise<void> {
  const names = await readdir(tmpdir()).catch(() => [] as string[]);
  for (const name of names) {
    const prefix = rootPrefix();
    const pid = name.startsWith(prefix) ? Number(/^(\d+)-/.exec(name.slice(prefix.length))?.[1]) : 0;
    if (!pid || pid === process.pid || alive(pid)) continue;
    await rm(join(tmpdir(), name), { recursive: true, force: true }).catch((err: unknown) =>
      logger.warn({ err, dir: name }, 'exec_shell: a stale workspace directory could not be removed'),
    );
  }
}

function alive(pid: number): boolean {
  try {
    process.kill(pid, 0);
    return true;
  } catch (err) {
    return (err as NodeJS.ErrnoException).code === 'EPERM';
  }
}

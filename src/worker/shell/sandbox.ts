import { type ChildProcess, spawn } from 'node:child_process';
import { existsSync, lstatSync, readdirSync, readlinkSync, type Stats } from 'node:fs';
import { join } from 'node:path';

/**
 * The process sandbox every exec_shell command (and every archive of a workspace) runs in:
 * bubblewrap, unprivileged, with a fresh user, PID, network, IPC, UTS and cgroup namespace.
 * What a process inside sees (docs/agent.md, "exec_shell"):
 *
 * - /usr, /bin, /lib* and /etc read-only; of /etc only what any user of the host may read
 *   (entries not readable by others, /etc/shadow among them, are covered);
 * - the chat's workspace at /workspace, the only writable path besides a private /tmp
 *   (tmpfs, capped); the root itself is read-only; no host /tmp, /home, /run, /var, /sys;
 * - its own /proc (its own PID namespace: no other process of the host, the worker's
 *   included) and a minimal /dev;
 * - an empty environment but PATH, HOME, LANG, TMPDIR (and the proxy variables when
 *   EXEC_SHELL_NETWORK names hosts): bwrap itself is started with an empty environment, so
 *   not even the sandbox's PID 1 holds one of the worker's variables;
 * - no network interface but its own loopback (the host's 127.0.0.1 — Redis — is another
 *   namespace's);
 * - limits set by the shell that starts the command: processes (RLIMIT_NPROC, counted in the
 *   sandbox's own user namespace), address space per process, file size, open files.
 *
 * A worker running as root starts bwrap as `nobody`: the sandbox's processes are then nobody
 * on the host too, so neither file permissions nor RLIMIT_NPROC (which root ignores) are
 * waived for them. The whole sandbox dies with its bwrap (--die-with-parent, and PID 1 of
 * its namespace taking every other process with it), which dies with the worker.
 */

/** Where bubblewrap is looked for (Debian's `bubblewrap` installs /usr/bin/bwrap). */
const BWRAP_PATHS = ['/usr/bin/bwrap', '/usr/local/bin/bwrap', '/bin/bwrap'];

/** The top-level system directories a shell needs, mounted as the host has them. */
const SYSTEM_DIRS = ['bin', 'sbin', 'lib', 'lib32', 'lib64', 'libx32'];

/** The workspace inside the sandbox. */
export const WORKSPACE = '/workspace';

/** The proxy's socket inside the sandbox (EXEC_SHELL_NETWORK). */
export const PROXY_SOCKET = '/run/chatlane/proxy.sock';

/** The port the in-sandbox bridge to the proxy listens on (its own loopback). */
export const PROXY_PORT = 3128;

/** The host user a root worker runs sandboxes as. */
const NOBODY = 65534;

export interface SandboxLimits {
  /** RLIMIT_NPROC inside the sandbox's user namespace. */
  processes: number;
  /** RLIMIT_AS of each process, bytes. */
  memoryBytes: number;
  /** RLIMIT_FSIZE of each process and the size of the private /tmp, bytes. */
  fileBytes: number;
}

export interface SandboxSpec {
  bwrap: string;
  /** The host user the sandbox runs as when the worker is root (undefined: the worker's). */
  uid: number | undefined;
  /** Mount arguments for the system part, computed once. */
  systemMounts: string[];
  readonlyDirs: string[];
  limits: SandboxLimits;
  /** Host path of the allow-list proxy's socket (EXEC_SHELL_NETWORK), if any. */
  proxySocket?: string | undefined;
}

export class SandboxUnavailableError extends Error {
  override name = 'SandboxUnavailableError';
}

/** The bwrap binary, or undefined. */
export function findBwrap(paths: readonly string[] = BWRAP_PATHS): string | undefined {
  return paths.find((p) => existsSync(p));
}

/** Whether others (not owner, not group) may read it: what every host user sees. */
function worldReadable(st: Stats): boolean {
  return (st.mode & 0o004) !== 0 && (!st.isDirectory() || (st.mode & 0o001) !== 0);
}

/**
 * Entries under `dir` that others may not read (/etc/shadow, /etc/gshadow, ssh host keys,
 * /etc/ssl/private, sudoers …): covered inside the sandbox. A sandbox of a worker that runs as
 * the owner of such a file would otherwise read it. Directories others cannot enter are
 * covered whole, and not walked.
 */
export function unreadableEntries(dir: string): Array<{ path: string; dir: boolean }> {
  const out: Array<{ path: string; dir: boolean }> = [];
  const walk = (path: string, depth: number) => {
    let names: string[];
    try {
      names = readdirSync(path);
    } catch {
      return;
    }
    for (const name of names) {
      const full = join(path, name);
      let st: Stats;
      try {
        st = lstatSync(full);
      } catch {
        continue;
      }
      if (st.isSymbolicLink()) continue;
      if (!worldReadable(st)) out.push({ path: full, dir: st.isDirectory() });
      else if (st.isDirectory() && depth < 8) walk(full, depth + 1);
    }
  };
  walk(dir, 0);
  return out;
}

/** The read-only system part of every sandbox: /usr, /bin, /lib*, /etc minus what is secret. */
export function systemMounts(root = '/'): string[] {
  const args = ['--ro-bind', join(root, 'usr'), '/usr'];
  for (const name of SYSTEM_DIRS) {
    const host = join(root, name);
    let st: Stats;
    try {
      st = lstatSync(host);
    } catch {
      continue;
    }
    if (st.isSymbolicLink()) args.push('--symlink', readlinkSync(host), `/${name}`);
    else if (st.isDirectory()) args.push('--ro-bind', host, `/${name}`);
  }
  args.push('--ro-bind', join(root, 'etc'), '/etc');
  for (const entry of unreadableEntries(join(root, 'etc'))) {
    const inside = `/etc/${entry.path.slice(join(root, 'etc').length + 1)}`;
    if (entry.dir) args.push('--tmpfs', inside, '--remount-ro', inside);
    else args.push('--ro-bind', '/dev/null', inside);
  }
  return args;
}

/**
 * The shell that starts every command: it sets the limits (both soft and hard, so the command
 * cannot raise them), starts the bridge to the proxy when there is one, then becomes the
 * command. $1..$3 are the limits, $4 whether to bridge, the rest the command's argv.
 */
const STARTER = [
  'umask 022',
  'ulimit -c 0 && ulimit -n 1024 && ulimit -u "$1" && ulimit -v "$2" && ulimit -f "$3" ||',
  '  { echo "chatlane: the sandbox could not set its limits" >&2; exit 125; }',
  'if [ "$4" = 1 ]; then',
  `  socat TCP-LISTEN:${PROXY_PORT},bind=127.0.0.1,fork,reuseaddr UNIX-CONNECT:${PROXY_SOCKET} 2>/dev/null &`,
  '  for _ in $(seq 200); do',
  `    (exec 3<>/dev/tcp/127.0.0.1/${PROXY_PORT}) 2>/dev/null && break`,
  '    sleep 0.01',
  '  done',
  'fi',
  'shift 4',
  'exec "$@"',
].join('\n');

export interface SandboxProcessOptions {
  /** Host directory mounted at /workspace (the only writable path besides /tmp). */
  workspace: string;
  /** The program and its arguments, run inside. */
  argv: string[];
  /** Standard input: a pipe to write to, or /dev/null. */
  stdin?: 'pipe' | 'ignore';
  /** Variables added to the sandbox's environment. */
  env?: Record<string, string>;
  /** Open the allow-list proxy to this process (a spec with a proxy only). */
  network?: boolean;
}

/** bwrap's arguments for one process. */
export function bwrapArgs(spec: SandboxSpec, opts: SandboxProcessOptions): string[] {
  const { limits } = spec;
  const network = opts.network === true && spec.proxySocket !== undefined;
  const args = [
    '--unshare-all',
    '--unshare-user',
    '--disable-userns',
    '--die-with-parent',
    '--new-session',
    '--hostname',
    'sandbox',
    ...spec.systemMounts,
    '--proc',
    '/proc',
    '--dev',
    '/dev',
    '--size',
    String(limits.fileBytes),
    '--perms',
    '1777',
    '--tmpfs',
    '/tmp',
    '--bind',
    opts.workspace,
    WORKSPACE,
  ];
  for (const dir of spec.readonlyDirs) args.push('--ro-bind', dir, dir);
  if (network) args.push('--ro-bind', spec.proxySocket!, PROXY_SOCKET);
  args.push('--remount-ro', '/', '--chdir', WORKSPACE, '--clearenv');
  const env: Record<string, string> = {
    PATH: '/usr/local/bin:/usr/bin:/bin',
    HOME: WORKSPACE,
    LANG: 'C.UTF-8',
    TMPDIR: '/tmp',
    ...(network && proxyEnv()),
    ...opts.env,
  };
  for (const [name, value] of Object.entries(env)) args.push('--setenv', name, value);
  args.push(
    '--',
    '/bin/bash',
    '-c',
    STARTER,
    'chatlane-sandbox',
    String(limits.processes),
    String(Math.floor(limits.memoryBytes / 1024)),
    String(Math.ceil(limits.fileBytes / 1024)),
    network ? '1' : '0',
    ...opts.argv,
  );
  return args;
}

/** What HTTP clients inside read to reach the proxy (curl, pip, npm, git, Python, Node …). */
function proxyEnv(): Record<string, string> {
  const url = `http://127.0.0.1:${PROXY_PORT}`;
  return {
    HTTP_PROXY: url,
    HTTPS_PROXY: url,
    http_proxy: url,
    https_proxy: url,
    ALL_PROXY: url,
    all_proxy: url,
  };
}

/**
 * Start one process in the sandbox. Its own process group (a kill reaches bwrap, whose death
 * takes the whole sandbox), stdout and stderr piped; bwrap gets an empty environment.
 */
export function spawnSandboxed(spec: SandboxSpec, opts: SandboxProcessOptions): ChildProcess {
  return spawn(spec.bwrap, bwrapArgs(spec, opts), {
    env: {},
    stdio: [opts.stdin ?? 'ignore', 'pipe', 'pipe'],
    detached: true,
    ...(spec.uid !== undefined && { uid: spec.uid, gid: spec.uid }),
  });
}

/** Kill a sandboxed process and everything in its sandbox (idempotent; it may be gone). */
export function killSandboxed(child: ChildProcess): void {
  if (child.pid === undefined || child.exitCode !== null || child.signalCode !== null) return;
  try {
    process.kill(-child.pid, 'SIGKILL');
  } catch {
    // Gone already.
  }
}

/** The host user sandboxes run as: nobody for a root worker, else the worker's own. */
export function sandboxUid(): number | undefined {
  return process.getuid?.() === 0 ? NOBODY : undefined;
}

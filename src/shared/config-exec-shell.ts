import { posix } from 'node:path';
import { z } from 'zod';
import { int } from './config-values.js';

/**
 * The `exec_shell` tool's variables (docs/agent.md, "exec_shell"): spread into config.ts's
 * schema. The tool runs `bash -c` in a bubblewrap sandbox; these are its switch, its limits
 * and what it may reach.
 */

/** One entry of EXEC_SHELL_NETWORK: a host name (or `*.` + a domain) and the ports allowed. */
export interface AllowedHost {
  /** Lower case; `*.example.com` matches every subdomain of example.com, not itself. */
  host: string;
  /** Ports allowed; a name given without a port allows 80 and 443. */
  ports: number[];
}

const HOST_LABEL = '[a-z0-9](?:[a-z0-9-]{0,61}[a-z0-9])?';
const NETWORK_ENTRY = new RegExp(`^(\\*\\.)?(${HOST_LABEL}(?:\\.${HOST_LABEL})*)(?::(\\d{1,5}))?$`);

/** `host`, `host:port` or `*.domain[:port]`, comma-separated; unset = no network at all. */
const networkList = z
  .string()
  .optional()
  .transform((v, ctx): AllowedHost[] => {
    const byHost = new Map<string, Set<number>>();
    for (const raw of (v ?? '').split(',')) {
      const item = raw.trim().toLowerCase();
      if (item === '') continue;
      const m = NETWORK_ENTRY.exec(item);
      const port = m?.[3] === undefined ? undefined : Number(m[3]);
      if (!m || (port !== undefined && (port < 1 || port > 65535))) {
        ctx.addIssue({ code: 'custom', message: `'${item}' is not host, host:port or *.domain[:port]` });
        continue;
      }
      const host = `${m[1] ?? ''}${m[2]}`;
      const ports = byHost.get(host) ?? new Set<number>();
      for (const p of port === undefined ? [80, 443] : [port]) ports.add(p);
      byHost.set(host, ports);
    }
    return [...byHost].map(([host, ports]) => ({ host, ports: [...ports].sort((a, b) => a - b) }));
  });

/** Paths inside the sandbox that a read-only directory must not cover or sit in. */
const RESERVED_INSIDE = ['/workspace', '/proc', '/dev', '/run/chatlane'];

/** Absolute directories, comma-separated, each mounted read-only at the same path inside. */
const readonlyDirs = z
  .string()
  .optional()
  .transform((v, ctx): string[] => {
    const dirs: string[] = [];
    for (const raw of (v ?? '').split(',')) {
      const item = raw.trim();
      if (item === '') continue;
      const dir = posix.normalize(item).replace(/(.)\/$/, '$1');
      if (!posix.isAbsolute(item) || item.split('/').includes('..') || dir === '/') {
        ctx.addIssue({ code: 'custom', message: `'${item}' is not an absolute directory below /` });
        continue;
      }
      const clash = RESERVED_INSIDE.find(
        (r) => dir === r || dir.startsWith(`${r}/`) || r.startsWith(`${dir}/`),
      );
      if (clash) {
        ctx.addIssue({
          code: 'custom',
          message: `'${item}' overlaps ${clash}, which the sandbox mounts itself`,
        });
        continue;
      }
      if (!dirs.includes(dir)) dirs.push(dir);
    }
    return dirs;
  });

export const execShellShape = () => ({
  EXEC_SHELL: z
    .enum(['off', 'approve', 'on'], { error: () => 'must be off, approve or on' })
    .default('off')
    .describe(
      "on gives the model exec_shell: bash -c in a bubblewrap sandbox over the chat's own workspace (no network, limits below); approve does the same, and every command waits for a person's approval (docs/approvals.md); the worker refuses to start when the sandbox cannot, never runs a command unsandboxed",
    ),
  EXEC_SHELL_TIMEOUT_MS: int(30_000, 100)
    .pipe(z.number().max(600_000))
    .describe(
      "one command's time limit: past it every process of the command is killed and the result says so; must be below LLM_TIMEOUT_MS (a command runs inside a model step)",
    ),
  EXEC_SHELL_OUTPUT_MAX_BYTES: int(16_384, 256).describe(
    "bytes of a command's stdout, and again of its stderr, the model gets: the first and last halves, with the count of bytes left out between them",
  ),
  EXEC_SHELL_MAX_PROCESSES: int(64, 4)
    .pipe(z.number().max(4096))
    .describe(
      'processes one command may run at once inside its sandbox (RLIMIT_NPROC in its own user namespace)',
    ),
  EXEC_SHELL_MEMORY_MAX_BYTES: int(1024 * 1024 * 1024, 16 * 1024 * 1024).describe(
    'address space of each process of a command (RLIMIT_AS); a process past it fails to allocate',
  ),
  EXEC_SHELL_WORKSPACE_MAX_BYTES: int(8 * 1024 * 1024, 64 * 1024)
    .pipe(z.number().max(256 * 1024 * 1024))
    .describe(
      "size cap of a chat's workspace as archived (tar, before compression): a bigger one is not saved and the command's result says so; also the size cap of one file (RLIMIT_FSIZE) and of the sandbox's private /tmp",
    ),
  EXEC_SHELL_NETWORK: networkList.describe(
    'hosts a command may reach over HTTP(S), host, host:port or *.domain (a name alone allows ports 80 and 443), through a proxy outside the sandbox that never connects to a private address; unset: no network at all',
  ),
  EXEC_SHELL_READONLY_DIRS: readonlyDirs.describe(
    'absolute host directories mounted read-only inside the sandbox at the same path (e.g. a repository the agent may read); each must exist when the worker starts',
  ),
});

/** A worker's exec_shell settings, as the sandbox reads them. */
export interface ExecShellConfig {
  EXEC_SHELL: 'off' | 'approve' | 'on';
  EXEC_SHELL_TIMEOUT_MS: number;
  EXEC_SHELL_OUTPUT_MAX_BYTES: number;
  EXEC_SHELL_MAX_PROCESSES: number;
  EXEC_SHELL_MEMORY_MAX_BYTES: number;
  EXEC_SHELL_WORKSPACE_MAX_BYTES: number;
  EXEC_SHELL_NETWORK: AllowedHost[];
  EXEC_SHELL_READONLY_DIRS: string[];
}

/** Problems between variables (one line each, naming the variable to fix). */
export function execShellProblems(config: ExecShellConfig & { LLM_TIMEOUT_MS: number }): string[] {
  if (config.EXEC_SHELL === 'off') return [];
  if (config.EXEC_SHELL_TIMEOUT_MS >= config.LLM_TIMEOUT_MS)
    return [
      `  EXEC_SHELL_TIMEOUT_MS: must be below LLM_TIMEOUT_MS (${config.LLM_TIMEOUT_MS}): a command runs inside a model step, which LLM_TIMEOUT_MS bounds`,
    ];
  return [];
}

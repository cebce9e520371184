import { parseArgs } from 'node:util';

/**
 * The `chatlane` command line: which commands there are, what each takes, and what
 * `--help` prints. Parsing decides everything before anything runs: `-h`/`--help` anywhere
 * after a command prints its help and starts nothing (no configuration read, no Redis, no
 * port), and an argument a command does not take is a usage error (exit 2), never ignored.
 */

/** Commands that run a chatlane role (or the mock model) until SIGTERM or SIGINT. */
export const ROLE_COMMANDS = ['ingress', 'worker', 'compactor', 'delivery', 'all', 'mock-llm'] as const;
export type RoleCommand = (typeof ROLE_COMMANDS)[number];

export const COMMANDS = [...ROLE_COMMANDS, 'demo', 'loadtest', 'config'] as const;
export type Command = (typeof COMMANDS)[number];

export const USAGE = `usage: chatlane <command> [options]
       chatlane <command> --help    what it does, and the variables or flags it takes

Roles (run until SIGTERM or SIGINT; configured by environment variables only):
  ingress    HTTP API and webhooks
  worker     turn worker (needs LLM_MODEL, provider:model: see docs/models.md)
  compactor  history compaction worker (needs LLM_MODEL or COMPACTION_MODEL)
  delivery   reply delivery only (workers with a platform or webhook deliver too, unless DELIVERY_IN_WORKER=false)
  all        ingress + worker + compactor in one process (development)
  mock-llm   the OpenAI-compatible mock model used by tests and the demo

Commands:
  demo       end-to-end demo on a local Redis and the mock model (--web: the web chat page)
  loadtest   drive a running deployment over HTTP and check its invariants
  config     every environment variable: type, default, allowed range, roles, meaning

New here? chatlane demo, then chatlane all --help for what to set.`;

export const DEMO_HELP = `chatlane demo: a local Redis (started if none answers at REDIS_URL), the mock model, an ingress and a worker in one process; a short conversation, a Telegram round trip and a 10-second load test, then it exits.

usage: chatlane demo [--web]

  --web       instead serve the web chat page (examples/web-chat, built by npm run build:web) and run until Ctrl-C
  -h, --help  this help

Reads REDIS_URL (default redis://127.0.0.1:6379).
`;

export const CONFIG_HELP = `chatlane config: the configuration reference. Every environment variable chatlane reads, with its type, default, allowed range, the roles that read it and its meaning, grouped by area (Start here first: the model, Redis, the port, access), then the chat platforms' variables. docs/configuration.md is the same reference.

usage: chatlane config [--role <role>] [--markdown]

  --role <role>  only what <role> reads: ingress, worker, compactor, delivery, mock-llm, loadtest or all
  --markdown     as Markdown tables (docs/configuration.md is chatlane config --markdown)
  -h, --help     this help

chatlane <role> --help says what a role does and lists the variables it reads.
`;

export type CommandLine =
  /** Print `command`'s help (the program's when undefined) on stdout; exit 0. */
  | { action: 'help'; command: Command | undefined }
  /** Print the message, and the usage when asked, on stderr; exit 2. */
  | { action: 'usage-error'; message: string; command?: Command; usage?: boolean }
  | { action: 'role'; command: RoleCommand }
  | { action: 'demo'; web: boolean }
  | { action: 'loadtest'; args: string[] }
  | { action: 'config'; role: string | undefined; markdown: boolean };

const isCommand = (word: string | undefined): word is Command => COMMANDS.includes(word as Command);
const HELP_FLAGS = ['-h', '--help'];

/** `argv` without node and the script: `['worker']`, `['config', '--role', 'worker']`, … */
export function parseCommandLine(argv: readonly string[]): CommandLine {
  const [command, ...args] = argv;
  if (command === undefined) return { action: 'usage-error', message: 'no command given', usage: true };
  if (HELP_FLAGS.includes(command)) return { action: 'help', command: undefined };
  if (command === 'help') {
    const about = args[0];
    if (about === undefined) return { action: 'help', command: undefined };
    if (isCommand(about)) return { action: 'help', command: about };
    return { action: 'usage-error', message: `unknown command '${about}'`, usage: true };
  }
  if (!isCommand(command))
    return { action: 'usage-error', message: `unknown command '${command}'`, usage: true };
  if (args.some((a) => HELP_FLAGS.includes(a))) return { action: 'help', command };
  if (command === 'loadtest') return { action: 'loadtest', args };
  try {
    if (command === 'demo') {
      const { values } = parseArgs({ args, options: { web: { type: 'boolean' } }, strict: true });
      return { action: 'demo', web: values.web === true };
    }
    if (command === 'config') {
      const { values } = parseArgs({
        args,
        options: { role: { type: 'string' }, markdown: { type: 'boolean' } },
        strict: true,
      });
      return { action: 'config', role: values.role, markdown: values.markdown === true };
    }
  } catch (err) {
    return { action: 'usage-error', message: (err as Error).message, command };
  }
  if (args.length > 0) {
    return {
      action: 'usage-error',
      message: `unexpected argument '${args[0]}': it takes none, only environment variables`,
      command,
    };
  }
  return { action: 'role', command };
}

/** The help `chatlane [<command>] --help` prints; each loaded only when asked for. */
export async function helpText(command: Command | undefined): Promise<string> {
  if (command === undefined) return `${USAGE}\n`;
  if (command === 'demo') return DEMO_HELP;
  if (command === 'config') return CONFIG_HELP;
  if (command === 'loadtest') return `${(await import('../loadtest/options.js')).HELP}\n`;
  return (await import('../shared/config-text.js')).roleHelp(command);
}

/** What stderr gets for a usage error. */
export function usageErrorText(line: Extract<CommandLine, { action: 'usage-error' }>): string {
  const where = line.command ? `chatlane ${line.command}` : 'chatlane';
  const more = line.usage ? `\n\n${USAGE}` : `\n(see ${where} --help)`;
  return `${where}: ${line.message}${more}\n`;
}

#!/usr/bin/env node
import closeWithGrace from 'close-with-grace';
import { type Config, ConfigError, loadConfig } from './shared/config.js';
import { createLogger, type Logger } from './shared/logger.js';
import { SHUTDOWN_BACKSTOP_MS } from './shared/process/grace.js';
import { tracingSettings } from './shared/tracing/settings.js';
import { startTracing } from './shared/tracing/start.js';
import type { ChatlaneRole } from './start/options.js';

const ROLES = ['ingress', 'worker', 'compactor', 'delivery', 'all', 'mock-llm', 'demo', 'loadtest'] as const;
type Role = (typeof ROLES)[number];

const USAGE = `usage: chatlane <role> [--help]
       chatlane config [--role <role>] [--markdown]
  ingress    HTTP API and webhooks
  worker     turn worker (needs LLM_MODEL, provider:model: see docs/models.md)
  compactor  history compaction worker (needs LLM_MODEL or COMPACTION_MODEL)
  delivery   reply delivery only (workers with a platform or webhook deliver too, unless DELIVERY_IN_WORKER=false)
  all        ingress + worker + compactor in one process (development)
  mock-llm   the OpenAI-compatible mock model used by tests and the demo
  demo       end-to-end demo on a local Redis and the mock model
  loadtest   drive a running deployment over HTTP and check its invariants (--help)
  config     every environment variable: type, default, allowed range, roles, meaning`;

interface Closable {
  close(): Promise<void>;
}

/** The roles each CLI role runs: through `launch`, the code `startChatlane` runs too. */
const RUNS: Record<Exclude<Role, 'mock-llm' | 'demo' | 'loadtest'>, ChatlaneRole[]> = {
  ingress: ['ingress'],
  worker: ['worker'],
  compactor: ['compactor'],
  delivery: ['delivery'],
  all: ['ingress', 'worker', 'compactor'],
};

/**
 * SIGTERM/SIGINT (or a fatal error) close every handle once, in parallel: the ingress
 * refuses new work (503) and drains in-flight requests; workers stop fetching and let
 * running turns finish up to SHUTDOWN_GRACE_MS. Then exit 0 (1 after a fatal error).
 * A second signal exits 1 at once; a close still hanging past the grace plus
 * SHUTDOWN_BACKSTOP_MS exits 1.
 */
function onShutdown(handles: Closable[], config: Config, logger: Logger, last?: Closable): void {
  closeWithGrace(
    {
      delay: config.SHUTDOWN_GRACE_MS + SHUTDOWN_BACKSTOP_MS,
      logger: { error: (err: unknown) => logger.error({ err }, 'shutdown failed') },
      onSecondSignal: (signal) => logger.warn({ signal }, 'second signal: exiting now'),
      onSecondError: (err) => logger.error({ err }, 'error while shutting down: exiting now'),
      onTimeout: (delayMs) => logger.error({ delayMs }, 'shutdown did not finish in time: exiting now'),
    },
    async ({ signal, err }) => {
      if (err) logger.error({ err }, 'fatal error: shutting down');
      else logger.info({ signal }, 'shutting down');
      await Promise.allSettled(handles.map((h) => h.close()));
      // The spans of the shutdown itself go out too.
      await last?.close().catch((e: unknown) => logger.warn({ err: e }, 'trace export at shutdown failed'));
      logger.info('shut down');
    },
  );
}

/**
 * `chatlane config [--role R] [--markdown]` and `chatlane <role> --help`: the configuration
 * reference, built from the schema only when asked (a running role never loads it).
 */
async function reference(role: string, args: string[]): Promise<number> {
  const [ref, text] = await Promise.all([
    import('./shared/config-reference.js'),
    import('./shared/config-text.js'),
  ]);
  if (role !== 'config') {
    if (role === 'demo') {
      process.stdout.write(
        'chatlane demo: a local Redis (started if none answers), the mock model, an ingress and a worker in one process; a short conversation, a Telegram round trip and a 10-second load test. Reads REDIS_URL.\n  --web  instead serve the web chat page (examples/web-chat, built by npm run build:web) and run until Ctrl-C.\n',
      );
      return 0;
    }
    process.stdout.write(text.roleHelp(role as Parameters<typeof text.roleHelp>[0]));
    return 0;
  }
  const at = args.indexOf('--role');
  const wanted = at === -1 ? undefined : args[at + 1];
  const known: readonly string[] = [...ref.ROLES, 'all'];
  if (at !== -1 && (wanted === undefined || !known.includes(wanted))) {
    process.stderr.write(`chatlane config: --role must be one of ${known.join(', ')}\n`);
    return 2;
  }
  const role_ = wanted as Parameters<typeof text.referenceOf>[0];
  if (args.includes('--markdown')) {
    const { docs, platforms } = text.referenceOf(role_);
    process.stdout.write(ref.configurationMarkdown(docs, platforms));
  } else process.stdout.write(`${text.referenceText(role_)}\n`);
  return 0;
}

async function main(): Promise<void> {
  const role = process.argv[2] as Role | 'config' | undefined;
  const args = process.argv.slice(3);
  if (role === 'config' || (role && role !== 'loadtest' && ROLES.includes(role) && args.includes('--help'))) {
    const code = await reference(role, args);
    process.stdout.write('', () => process.exit(code));
    return;
  }
  if (!role || !ROLES.includes(role)) {
    console.error(USAGE);
    process.exit(2);
  }
  if (role === 'mock-llm') {
    const { runMockLlm } = await import('./mock-llm/server.js');
    await runMockLlm();
    return;
  }
  if (role === 'loadtest') {
    const { loadtestMain } = await import('./loadtest/main.js');
    const code = await loadtestMain(process.argv.slice(3));
    // Let stdout drain into a pipe before leaving.
    process.stdout.write('', () => process.exit(code));
    return;
  }
  if (role === 'demo') {
    if (args.includes('--web')) {
      const { runWebDemo } = await import('./demo/web-run.js');
      process.exit(await runWebDemo());
    }
    const { runDemo } = await import('./demo/demo.js');
    process.exit(await runDemo());
  }
  const config = loadConfig();
  // Before any role module is imported: the instrumented packages are patched as they load.
  const tracing = await startTracing(tracingSettings(config, role));
  const logger = createLogger(config.LOG_LEVEL, `chatlane-${role}`, tracing !== undefined);
  // Installed first so signals are ours from the start; handles join once started (a signal
  // before that exits with nothing to close, like a crash: any job taken is recovered).
  const handles: Closable[] = [];
  onShutdown(handles, config, logger, tracing && { close: () => tracing.shutdown() });
  const { launch } = await import('./start/launch.js');
  handles.push(await launch(config, { roles: RUNS[role], logger }));
}

main().catch((err: unknown) => {
  if (err instanceof ConfigError) {
    console.error(`chatlane: ${err.message}`);
    process.exit(2);
  }
  console.error(err);
  process.exit(1);
});

#!/usr/bin/env node
import closeWithGrace from 'close-with-grace';
import { type Config, ConfigError, loadConfig } from './shared/config.js';
import { createLogger, type Logger } from './shared/logger.js';
import { SHUTDOWN_BACKSTOP_MS } from './shared/process/grace.js';
import { RedisUnreachableError } from './shared/redis-watch.js';
import { tracingSettings } from './shared/tracing/settings.js';
import { startTracing } from './shared/tracing/start.js';
import { helpText, parseCommandLine, type RoleCommand, usageErrorText } from './start/cli-commands.js';
import type { ChatlaneRole } from './start/options.js';

interface Closable {
  close(): Promise<void>;
}

/** The roles each CLI role runs: through `launch`, the code `startChatlane` runs too. */
const RUNS: Record<Exclude<RoleCommand, 'mock-llm'>, ChatlaneRole[]> = {
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

/** `chatlane config [--role R] [--markdown]`: the configuration reference, built from the schema only when asked (a running role never loads it). */
async function config(role: string | undefined, markdown: boolean): Promise<number> {
  const [ref, text] = await Promise.all([
    import('./shared/config-reference.js'),
    import('./shared/config-text.js'),
  ]);
  const known: readonly string[] = [...ref.ROLES, 'all'];
  if (role !== undefined && !known.includes(role)) {
    process.stderr.write(`chatlane config: --role must be one of ${known.join(', ')}\n`);
    return 2;
  }
  const wanted = role as Parameters<typeof text.referenceOf>[0];
  if (markdown) {
    const { docs, platforms } = text.referenceOf(wanted);
    process.stdout.write(ref.configurationMarkdown(docs, platforms));
  } else process.stdout.write(`${text.referenceText(wanted)}\n`);
  return 0;
}

/** Exit once stdout has drained into its pipe (help and the reference can be long). */
function exitAfterOutput(code: number): void {
  process.stdout.write('', () => process.exit(code));
}

async function main(): Promise<void> {
  const line = parseCommandLine(process.argv.slice(2));
  switch (line.action) {
    case 'help':
      process.stdout.write(await helpText(line.command));
      return exitAfterOutput(0);
    case 'usage-error':
      process.stderr.write(usageErrorText(line));
      process.exit(2);
      return;
    case 'config':
      return exitAfterOutput(await config(line.role, line.markdown));
    case 'loadtest': {
      const { loadtestMain } = await import('./loadtest/main.js');
      return exitAfterOutput(await loadtestMain(line.args));
    }
    case 'demo': {
      if (line.web) {
        const { runWebDemo } = await import('./demo/web-run.js');
        process.exit(await runWebDemo());
      }
      const { runDemo } = await import('./demo/demo.js');
      process.exit(await runDemo());
      return;
    }
    case 'role':
      if (line.command === 'mock-llm') {
        const { runMockLlm } = await import('./mock-llm/server.js');
        await runMockLlm();
        return;
      }
      return runRole(line.command);
  }
}

async function runRole(role: Exclude<RoleCommand, 'mock-llm'>): Promise<void> {
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
  if (err instanceof RedisUnreachableError) {
    console.error(`chatlane: ${err.message}`);
    process.exit(1);
  }
  console.error(err);
  process.exit(1);
});

#!/usr/bin/env node
import closeWithGrace from 'close-with-grace';
import { type Config, ConfigError, loadConfig } from './shared/config.js';
import { createLogger, type Logger } from './shared/logger.js';
import { SHUTDOWN_BACKSTOP_MS } from './worker/grace.js';

const ROLES = ['ingress', 'worker', 'compactor', 'all', 'mock-llm', 'demo'] as const;
type Role = (typeof ROLES)[number];

const USAGE = `usage: chatlane <role>
  ingress    HTTP API and webhooks
  worker     turn worker (needs LLM_BASE_URL and LLM_MODEL)
  compactor  history compaction worker (needs LLM_BASE_URL and LLM_MODEL)
  all        ingress + worker + compactor in one process (development)
  mock-llm   the OpenAI-compatible mock model used by tests and the demo
  demo       end-to-end demo on a local Redis and the mock model`;

interface Closable {
  close(): Promise<void>;
}

async function start(role: Role, config: Config, logger: Logger): Promise<Closable[]> {
  switch (role) {
    case 'ingress': {
      const { startIngress } = await import('./ingress/main.js');
      return [await startIngress(config, logger)];
    }
    case 'worker': {
      const { startWorker } = await import('./worker/main.js');
      return [await startWorker(config, logger)];
    }
    case 'all': {
      const { startWorker } = await import('./worker/main.js');
      const { startIngress } = await import('./ingress/main.js');
      const { startCompactor } = await import('./worker/compaction/main.js');
      const worker = await startWorker(config, logger);
      const compactor = await startCompactor(config, logger, { sideServer: false });
      return [await startIngress(config, logger), worker, compactor];
    }
    case 'compactor': {
      const { startCompactor } = await import('./worker/compaction/main.js');
      return [await startCompactor(config, logger)];
    }
    case 'mock-llm':
    case 'demo':
      throw new Error('unreachable');
  }
}

/**
 * SIGTERM/SIGINT (or a fatal error) close every handle once, in parallel: the ingress
 * refuses new work (503) and drains in-flight requests; workers stop fetching and let
 * running turns finish up to SHUTDOWN_GRACE_MS. Then exit 0 (1 after a fatal error).
 * A second signal exits 1 at once; a close still hanging past the grace plus
 * SHUTDOWN_BACKSTOP_MS exits 1.
 */
function onShutdown(handles: Closable[], config: Config, logger: Logger): void {
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
      logger.info('shut down');
    },
  );
}

async function main(): Promise<void> {
  const role = process.argv[2] as Role | undefined;
  if (!role || !ROLES.includes(role)) {
    console.error(USAGE);
    process.exit(2);
  }
  if (role === 'mock-llm') {
    const { runMockLlm } = await import('./mock-llm/server.js');
    await runMockLlm();
    return;
  }
  if (role === 'demo') {
    const { runDemo } = await import('./demo.js');
    process.exit(await runDemo());
  }
  const config = loadConfig();
  const logger = createLogger(config.LOG_LEVEL, `chatlane-${role}`);
  // Installed first so signals are ours from the start; handles join once started (a signal
  // before that exits with nothing to close, like a crash: any job taken is recovered).
  const handles: Closable[] = [];
  onShutdown(handles, config, logger);
  handles.push(...(await start(role, config, logger)));
}

main().catch((err: unknown) => {
  if (err instanceof ConfigError) {
    console.error(`chatlane: ${err.message}`);
    process.exit(2);
  }
  console.error(err);
  process.exit(1);
});

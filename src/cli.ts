#!/usr/bin/env node
import { type Config, ConfigError, loadConfig } from './shared/config.js';
import { createLogger, type Logger } from './shared/logger.js';

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
      const compactor = await startCompactor(config, logger);
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

/** SIGTERM/SIGINT close everything once; a second signal exits at once. */
function onSignals(handles: Closable[], logger: Logger): void {
  let stopping = false;
  const stop = (signal: string) => {
    if (stopping) {
      logger.warn({ signal }, 'second signal: exiting now');
      process.exit(1);
    }
    stopping = true;
    logger.info({ signal }, 'shutting down');
    // Ingress first (stop taking work), then workers (finish running turns).
    Promise.allSettled(handles.map((h) => h.close())).then(() => process.exit(0));
  };
  process.on('SIGTERM', () => stop('SIGTERM'));
  process.on('SIGINT', () => stop('SIGINT'));
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
  const handles = await start(role, config, logger);
  onSignals(handles, logger);
}

main().catch((err: unknown) => {
  if (err instanceof ConfigError) {
    console.error(`chatlane: ${err.message}`);
    process.exit(2);
  }
  console.error(err);
  process.exit(1);
});

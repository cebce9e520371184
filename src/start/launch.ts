import { apiAccessOf } from '../ingress/api-access.js';
import { type Config, ConfigError } from '../shared/config.js';
import { EventFeed, type EventSink } from '../shared/events.js';
import { chatKeyOfEventsKey } from '../shared/keys.js';
import { createLogger } from '../shared/logger.js';
import { createMetrics, type Metrics } from '../shared/metrics.js';
import type { Prepared } from '../shared/process/startup.js';
import { tracingSettings } from '../shared/tracing/settings.js';
import { startTracing } from '../shared/tracing/start.js';
import { loadMcpConfig } from '../worker/mcp/mcp-config.js';
import { CHATLANE_ROLES, type Chatlane, type ChatlaneOptions, type ChatlaneRole } from './options.js';

/**
 * The one way chatlane's roles start, whoever asks: `startChatlane` (a program) and the CLI
 * (`chatlane worker`, `chatlane all`, …) both come here with the configuration parsed from the
 * environment. So a worker started from code runs exactly the code `chatlane worker` runs.
 */

interface Closable {
  close(): Promise<void>;
}

type PreparedRole = Prepared<Closable>;

/** The roles asked for, checked, each once, in the order a process prepares them. */
export function rolesOf(roles: readonly ChatlaneRole[]): ChatlaneRole[] {
  const unknown = roles.filter((r) => !CHATLANE_ROLES.includes(r));
  if (unknown.length > 0) {
    throw new ConfigError(
      `roles: unknown role ${unknown.map((r) => `'${r}'`).join(', ')}; roles are ${CHATLANE_ROLES.join(', ')}`,
    );
  }
  if (roles.length === 0)
    throw new ConfigError(`roles: empty; give at least one of ${CHATLANE_ROLES.join(', ')}`);
  return CHATLANE_ROLES.filter((r) => roles.includes(r));
}

/**
 * The startup order for a process of one or more roles (see src/shared/process/startup.ts):
 * every role is prepared — configuration checked, connected, ports bound — before any of them
 * runs, so a failure in any role stops the start before it took a job. On failure, what was
 * prepared is closed again.
 */
async function startInOrder(steps: Array<() => Promise<PreparedRole>>): Promise<Closable[]> {
  const prepared: PreparedRole[] = [];
  const running: Closable[] = [];
  try {
    for (const prepare of steps) prepared.push(await prepare());
    for (const role of prepared) running.push(await role.run());
    return running;
  } catch (err) {
    await Promise.allSettled(prepared.map((p) => p.close()));
    throw err;
  }
}

/** The ingress takes no jobs: once listening it is prepared and running at once. */
const started = (handle: Closable): PreparedRole => ({
  run: async () => handle,
  close: () => handle.close(),
});

/**
 * Each role's start, in order. The role modules are imported here, after tracing started,
 * so the packages they load (ioredis, BullMQ, Fastify, undici) are patched as they load; and
 * only the asked-for roles' modules are loaded (a worker loads no web framework).
 */
function roleSteps(
  roles: readonly ChatlaneRole[],
  config: Config,
  options: ChatlaneOptions & { logger: NonNullable<ChatlaneOptions['logger']> },
  metrics: Metrics,
  urls: { ingress?: string; side?: string | undefined },
): Array<() => Promise<PreparedRole>> {
  const { logger, roles: _roles, env: _env, tracing: _tracing, onEvent, ...turn } = options;
  // A program's onEvent: every store of every role hands the events it writes to one feed.
  const events: EventSink | undefined =
    onEvent && new EventFeed(onEvent, logger, (key) => chatKeyOfEventsKey(config.CHATLANE_PREFIX, key)).sink;
  const has = (role: ChatlaneRole) => roles.includes(role);
  // One side server a process: the worker's, else the delivery role's, else the compactor's.
  const sideServerOf: ChatlaneRole | undefined = [
    'worker' as const,
    'delivery' as const,
    'compactor' as const,
  ].find(has);
  const steps: Array<() => Promise<PreparedRole>> = [];
  if (has('worker')) {
    steps.push(async () => {
      const { prepareWorker } = await import('../roles/worker.js');
      // With the delivery role here too, the worker delivers: one delivery worker, one sender registry.
      const prepared = await prepareWorker(config, logger, {
        ...turn,
        metrics,
        events,
        ...(has('delivery') && { delivery: true }),
      });
      urls.side = prepared.metricsUrl;
      return prepared;
    });
  }
  if (has('compactor')) {
    steps.push(async () => {
      const { prepareCompactor } = await import('../roles/compactor.js');
      const prepared = await prepareCompactor(config, logger, {
        metrics,
        events,
        sideServer: sideServerOf === 'compactor',
        ...(turn.model && { model: turn.model }),
      });
      if (sideServerOf === 'compactor') urls.side = prepared.metricsUrl;
      return prepared;
    });
  }
  if (has('delivery') && !has('worker')) {
    steps.push(async () => {
      const { prepareDelivery } = await import('../roles/delivery.js');
      const prepared = await prepareDelivery(config, logger, { metrics, events });
      urls.side = prepared.metricsUrl;
      return prepared;
    });
  }
  if (has('ingress')) {
    steps.push(async () => {
      const { startIngress } = await import('../roles/ingress.js');
      const handle = await startIngress(config, logger, { metrics, events });
      urls.ingress = handle.url;
      return started(handle);
    });
  }
  return steps;
}

/**
 * Starts `options.roles` with `config` (already parsed from the environment). In order:
 * checks that need no I/O (roles, MCP_CONFIG), tracing (before any role module loads), the
 * tools' names, the roles (./startup order), then a handle whose `close()` releases all of it.
 */
export async function launch(config: Config, options: ChatlaneOptions = {}): Promise<Chatlane> {
  const roles = rolesOf(options.roles ?? ['ingress', 'worker', 'compactor']);
  // The ingress's access rule, before any other role connects (startIngress checks it too).
  if (roles.includes('ingress')) apiAccessOf(config);
  const mcpServers = options.tools && Object.keys(loadMcpConfig(config.MCP_CONFIG)?.mcpServers ?? {});
  const role = roles.length === 1 ? roles[0]! : 'all';
  const tracing = options.tracing === false ? undefined : await startTracing(tracingSettings(config, role));
  const logger = options.logger ?? createLogger(config.LOG_LEVEL, `chatlane-${role}`, tracing !== undefined);
  // This instance's registry: two instances in one process count their own work.
  const metrics = createMetrics();
  const urls: { ingress?: string; side?: string | undefined } = {};
  let handles: Closable[];
  try {
    // Before any I/O; after tracing, as what checks them loads the store's modules.
    if (options.tools && mcpServers) {
      const { checkTools } = await import('../worker/agent/tools/custom-tools.js');
      await checkTools(options.tools, { mcpServers });
    }
    handles = await startInOrder(roleSteps(roles, config, { ...options, logger }, metrics, urls));
  } catch (err) {
    await tracing?.shutdown().catch(() => undefined);
    throw err;
  }
  let closing: Promise<void> | undefined;
  return {
    roles,
    url: urls.ingress,
    metricsUrl: urls.side,
    close() {
      closing ??= (async () => {
        // In parallel, as SIGTERM closes them: the ingress drains while the workers finish turns.
        await Promise.allSettled(handles.map((h) => h.close()));
        // The spans of the shutdown itself go out too.
        await tracing
          ?.shutdown()
          .catch((err: unknown) => logger.warn({ err }, 'trace export at shutdown failed'));
      })();
      return closing;
    },
  };
}

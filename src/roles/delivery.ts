import type { Worker } from 'bullmq';
import type { Config } from '../shared/config.js';
import type { SenderRegistry } from '../shared/delivery/sender.js';
import { createSenders } from '../shared/delivery/senders.js';
import type { EventSink } from '../shared/events.js';
import type { DeliveryJob } from '../shared/jobs.js';
import type { Logger } from '../shared/logger.js';
import { createMetrics, type Metrics } from '../shared/metrics.js';
import { startRoleSideServer } from '../shared/process/side-server.js';
import { Opened, type Prepared, runPrepared } from '../shared/process/startup.js';
import { checkRedisPolicy, closeRedis, createRedisClient } from '../shared/redis.js';
import { RedisWatch } from '../shared/redis-watch.js';
import { buildDeliveryWorker } from '../worker/delivery/delivery-parts.js';

export interface DeliveryHandle {
  worker: Worker<DeliveryJob>;
  metricsUrl: string;
  close(): Promise<void>;
}

export interface PreparedDelivery extends Prepared<DeliveryHandle> {
  metricsUrl: string;
}

/**
 * `chatlane delivery`: only the delivery worker, for operators who keep outbound traffic
 * (platform tokens, webhook egress) apart from the model workers or scale it separately.
 * It needs no model. Steps 1–3 of the startup order (`../shared/process/startup.ts`); jobs after `run()`.
 */
export async function prepareDelivery(
  config: Config,
  logger: Logger,
  { senders, ...parts }: { senders?: SenderRegistry; metrics?: Metrics; events?: EventSink | undefined } = {},
): Promise<PreparedDelivery> {
  // 1. Checks: the senders read their configuration.
  const registry = senders ?? (await createSenders(config, logger));
  const metrics = parts.metrics ?? createMetrics();

  // 2. Connections.
  const opened = new Opened();
  if (!senders) opened.add(() => registry.close());
  const connection = createRedisClient(config, 'worker', 'chatlane:delivery');
  opened.add(() => closeRedis(connection));
  // Nothing else is built until Redis answers (see prepareWorker).
  const watch = new RedisWatch(config, logger);
  watch.add(connection);
  await opened.step(() => watch.ready());
  const built = await opened.step(() =>
    buildDeliveryWorker(config, logger, connection, { senders: registry, metrics, events: parts.events }),
  );
  opened.add(() => built.close());
  await opened.step(() => checkRedisPolicy(connection, logger));

  // 3. Listeners.
  const side = await opened.step(() =>
    startRoleSideServer(config, {
      role: 'delivery',
      metrics,
      redis: connection,
      isRunning: () => built.worker.isRunning() && !built.worker.closing,
      logger,
    }),
  );
  opened.add(() => side.close());

  // 4. Run (on `run()`).
  let closing: Promise<void> | undefined;
  const handle: DeliveryHandle = {
    worker: built.worker,
    metricsUrl: side.url,
    close() {
      closing ??= (async () => {
        await built.close();
        await side.close();
        // Only what it opened: given senders are their owner's to close.
        if (!senders) await registry.close();
        await closeRedis(connection);
      })();
      return closing;
    },
  };
  let ran = false;
  return {
    metricsUrl: side.url,
    async run() {
      ran = true;
      built.run();
      logger.info(
        { concurrency: config.DELIVERY_CONCURRENCY, channels: registry.channels(), metricsUrl: side.url },
        'delivery started',
      );
      return handle;
    },
    close: () => (ran ? handle.close() : opened.closeAll()),
  };
}

export async function startDelivery(config: Config, logger: Logger): Promise<DeliveryHandle> {
  return runPrepared(await prepareDelivery(config, logger));
}

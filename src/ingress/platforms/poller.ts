import type { Adapter } from 'chat';
import type { Logger } from '../../shared/logger.js';
import type { PlatformRuntime } from '../../shared/platforms/runtime.js';
import type { RedisClient } from '../../shared/redis.js';
import { PollerLease } from '../../shared/store/poller-lease.js';

interface PollingAdapter extends Adapter {
  startPolling(): Promise<void>;
  stopPolling(): Promise<void>;
}

function canPoll(adapter: Adapter): adapter is PollingAdapter {
  const a = adapter as Partial<PollingAdapter>;
  return typeof a.startPolling === 'function' && typeof a.stopPolling === 'function';
}

export interface PollersOptions {
  runtime: PlatformRuntime;
  redis: RedisClient;
  prefix: string;
  leaseMs: number;
  /** Unique per process (host:pid:random). */
  holder: string;
  logger: Logger;
}

/**
 * Long polling for the platforms configured to poll (TELEGRAM_MODE=polling), one process of
 * the fleet at a time: every ingress runs a `PlatformPoller` per such platform, and only the
 * holder of the platform's Redis lease runs the adapter's polling loop. The adapter hands each
 * update to the same handler as webhooks (ingest only) and moves its getUpdates offset only
 * after the handler succeeded, so an update is confirmed to the platform only once stored.
 *
 * The holder renews every third of POLLER_LEASE_MS and stops polling when a renewal fails or
 * has not succeeded for two thirds of it (before the lease can expire and a successor start),
 * so two processes poll at once only if one stalls past that, and then the message id keeps
 * the ingest idempotent. A dead holder's lease expires and the next tick of another process
 * takes it (fence + 1).
 */
export function startPollers(opts: PollersOptions): { close(): Promise<void> } {
  const pollers: PlatformPoller[] = [];
  for (const [name, platform] of opts.runtime.platforms) {
    if (!platform.module.polling?.(platform.settings)) continue;
    const adapter = opts.runtime.adapter(name);
    if (!canPoll(adapter)) throw new Error(`the ${name} adapter cannot poll`);
    pollers.push(new PlatformPoller(name, adapter, opts));
  }
  return { close: async () => void (await Promise.all(pollers.map((p) => p.close()))) };
}

class PlatformPoller {
  private readonly lease: PollerLease;
  private readonly logger: Logger;
  private value: string | undefined;
  private lastRenewed = 0;
  private timer: NodeJS.Timeout | undefined;
  private ticking: Promise<void> = Promise.resolve();
  private closed = false;

  constructor(
    name: string,
    private readonly adapter: PollingAdapter,
    private readonly opts: PollersOptions,
  ) {
    this.lease = new PollerLease(opts.redis, opts.prefix, name, opts.holder);
    this.logger = opts.logger.child({ platform: name, poller: opts.holder });
    this.schedule(0);
  }

  private schedule(ms: number): void {
    if (this.closed) return;
    this.timer = setTimeout(() => {
      this.ticking = this.tick().finally(() => this.schedule(Math.floor(this.opts.leaseMs / 3)));
    }, ms);
  }

  private async tick(): Promise<void> {
    const { leaseMs } = this.opts;
    try {
      if (this.value === undefined) {
        this.value = await this.lease.acquire(leaseMs);
        if (this.value === undefined) return;
        this.lastRenewed = Date.now();
        this.logger.info({ lease: this.value }, 'poller lease taken: polling');
        await this.adapter.startPolling();
        return;
      }
      if (await this.lease.renew(this.value, leaseMs)) {
        this.lastRenewed = Date.now();
        return;
      }
      await this.stop('poller lease lost: stopped polling');
    } catch (err) {
      this.logger.warn({ err }, 'poller lease check failed');
      if (this.value !== undefined && Date.now() - this.lastRenewed > (2 * leaseMs) / 3) {
        await this.stop('poller lease not renewed in time: stopped polling');
      }
    }
  }

  private async stop(why: string): Promise<void> {
    this.value = undefined;
    await this.adapter.stopPolling().catch((err: unknown) => this.logger.warn({ err }, 'stopPolling failed'));
    this.logger.info(why);
  }

  async close(): Promise<void> {
    this.closed = true;
    clearTimeout(this.timer);
    await this.ticking;
    const value = this.value;
    if (value === undefined) return;
    await this.stop('poller closed');
    // Hand over at once instead of after the lease runs out.
    await this.lease.release(value).catch(() => undefined);
  }
}

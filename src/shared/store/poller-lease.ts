import { pollerFenceKey, pollerLeaseKey } from '../keys.js';
import { type RedisClient, scripts } from './scripts.js';

/**
 * The fleet-wide lease that lets exactly one process poll a platform (Telegram getUpdates).
 * The value is `<fence>:<holder>`; the fence grows with every new holder, so a holder that
 * lost the lease (expired while it stalled) can never renew over its successor.
 */
export class PollerLease {
  private readonly lease: string;
  private readonly fence: string;

  constructor(
    private readonly redis: RedisClient,
    prefix: string,
    platform: string,
    readonly holder: string,
  ) {
    this.lease = pollerLeaseKey(prefix, platform);
    this.fence = pollerFenceKey(prefix, platform);
  }

  /** The lease value when taken, undefined while another holder's lease lives. */
  async acquire(leaseMs: number): Promise<string | undefined> {
    const value = await scripts.pollerAcquire.run(
      this.redis,
      [this.lease, this.fence],
      [this.holder, leaseMs],
    );
    return typeof value === 'string' ? value : undefined;
  }

  /** true while `value` still holds the lease (now extended by `leaseMs`). */
  async renew(value: string, leaseMs: number): Promise<boolean> {
    return (await scripts.pollerRenew.run(this.redis, [this.lease], [value, leaseMs])) === 1;
  }

  async release(value: string): Promise<void> {
    await scripts.pollerRenew.run(this.redis, [this.lease], [value, 0]);
  }
}

import type { Logger } from './logger.js';
import type { RedisClient, RedisTopology } from './redis.js';

/**
 * How often a process says it is waiting for Redis, or cut off from it: one line, however
 * many times ioredis retried in between (several times a second at first, then every 2 s,
 * per connection).
 */
export const REDIS_REPORT_MS = 5000;

/** A start that gave up waiting for Redis; the message names where it looked and why. */
export class RedisUnreachableError extends Error {
  override name = 'RedisUnreachableError';
}

const hostPort = ({ host, port }: { host: string; port: number }) =>
  host.includes(':') ? `[${host}]:${port}` : `${host}:${port}`;

/** REDIS_URL as a log may show it: its password masked. */
function withoutPassword(url: string): string {
  try {
    const u = new URL(url);
    if (u.password) u.password = '***';
    return u.href.replace(/\/$/, '');
  } catch {
    return url;
  }
}

/**
 * Where this process looks for Redis, for a person: the address and the variables it comes
 * from (the Sentinel or Cluster ones when set), never a password.
 */
export function redisWhere(config: RedisTopology): string {
  if (config.REDIS_SENTINELS?.length && config.REDIS_SENTINEL_NAME) {
    return `the master '${config.REDIS_SENTINEL_NAME}' of the sentinels ${config.REDIS_SENTINELS.map(hostPort).join(',')} (REDIS_SENTINELS, REDIS_SENTINEL_NAME)`;
  }
  if (config.REDIS_CLUSTER_NODES?.length) {
    return `the Redis Cluster at ${config.REDIS_CLUSTER_NODES.map(hostPort).join(',')} (REDIS_CLUSTER_NODES)`;
  }
  return `Redis at ${withoutPassword(config.REDIS_URL)} (REDIS_URL)`;
}

/** An ioredis connection error in a few words ('connect ECONNREFUSED 127.0.0.1:6399'). */
function reasonOf(err: unknown): string {
  if (!(err instanceof Error)) return String(err);
  // Both address families refused: an AggregateError with an empty message and a code.
  const reason = err.message || (err as NodeJS.ErrnoException).code || err.name;
  // A Cluster's "Failed to refresh slots cache." carries why on the error of its last node.
  const last = (err as { lastNodeError?: unknown }).lastNodeError;
  return last === undefined ? reason : `${reason} (${reasonOf(last)})`;
}

/**
 * Reports a process's Redis connections the way a person wants to read it. ioredis emits
 * 'error' at every failed (re)connect of every connection: unheard, each becomes an
 * "[ioredis] Unhandled error event" stack on stderr; logged one by one, they bury the rest.
 * Here, while a role waits for Redis at start (`ready()`), one line every REDIS_REPORT_MS
 * naming where it looks and the last reason; once running, a connection error at most once
 * per REDIS_REPORT_MS (with how many there were), and one line when Redis answers again.
 */
export class RedisWatch {
  private readonly clients: RedisClient[] = [];
  private readonly where: string;
  private lastReason: string | undefined;
  private lastReportAt = Number.NEGATIVE_INFINITY;
  private errorsSinceReport = 0;
  /** Running, an error was reported and Redis has not answered since. */
  private lost = false;
  /** While `ready()` waits: its reporter and its check. */
  private waiting: { report(): void; check(): void } | undefined;

  constructor(
    config: RedisTopology,
    private readonly logger: Logger,
    private readonly everyMs = REDIS_REPORT_MS,
  ) {
    this.where = redisWhere(config);
  }

  /** Watch `client` (its 'error' and 'ready' events) from now on. */
  add<C extends RedisClient>(client: C): C {
    this.clients.push(client);
    client.on('error', (err: unknown) => this.onError(err));
    client.on('ready', () => this.onReady());
    return client;
  }

  /**
   * Resolves once every watched connection is ready, logging a line every REDIS_REPORT_MS
   * until then. With `timeoutMs`, gives up after it with a RedisUnreachableError naming
   * where it looked and the last reason.
   */
  async ready({ timeoutMs }: { timeoutMs?: number } = {}): Promise<void> {
    const pending = () => this.clients.filter((c) => c.status !== 'ready');
    if (pending().length === 0) return;
    const started = Date.now();
    let reported = false;
    const reason = () => this.lastReason ?? `no answer yet (${pending()[0]?.status ?? 'connecting'})`;
    let tick: NodeJS.Timeout | undefined;
    let deadline: NodeJS.Timeout | undefined;
    try {
      await new Promise<void>((resolve, reject) => {
        this.waiting = {
          report: () => {
            if (Date.now() - this.lastReportAt < this.everyMs) return;
            this.lastReportAt = Date.now();
            reported = true;
            this.logger.warn(
              { redis: this.where, waitedMs: Date.now() - started, reason: reason() },
              `waiting for ${this.where} to answer: ${reason()}; retrying`,
            );
          },
          check: () => {
            if (pending().length === 0) resolve();
          },
        };
        // Errors report at once (then at most every everyMs); this covers a connect that
        // hangs without an error, and a connection that became ready while nobody looked.
        tick = setInterval(
          () => {
            this.waiting?.check();
            if (Date.now() - started >= this.everyMs) this.waiting?.report();
          },
          Math.max(10, this.everyMs / 5),
        );
        if (timeoutMs !== undefined) {
          deadline = setTimeout(
            () =>
              reject(
                new RedisUnreachableError(
                  `${this.where} did not answer within ${Math.round(timeoutMs / 1000)} s: ${reason()}`,
                ),
              ),
            timeoutMs,
          );
        }
        this.waiting.check();
      });
    } finally {
      clearInterval(tick);
      clearTimeout(deadline);
      this.waiting = undefined;
    }
    if (reported) {
      this.logger.info(
        { redis: this.where, waitedMs: Date.now() - started },
        `${this.where} answered after ${Math.round((Date.now() - started) / 1000)} s`,
      );
    }
    this.lastReportAt = Number.NEGATIVE_INFINITY;
    this.errorsSinceReport = 0;
  }

  private onError(err: unknown): void {
    this.lastReason = reasonOf(err);
    if (this.waiting) {
      this.waiting.report();
      return;
    }
    this.errorsSinceReport += 1;
    if (Date.now() - this.lastReportAt < this.everyMs) return;
    this.logger.warn(
      { redis: this.where, err: this.lastReason, errors: this.errorsSinceReport },
      `redis connection error: ${this.lastReason} (${this.where}); reconnecting`,
    );
    this.lastReportAt = Date.now();
    this.errorsSinceReport = 0;
    this.lost = true;
  }

  private onReady(): void {
    if (this.waiting) {
      this.waiting.check();
      return;
    }
    if (!this.lost || this.clients.some((c) => c.status !== 'ready')) return;
    this.lost = false;
    this.lastReportAt = Number.NEGATIVE_INFINITY;
    this.errorsSinceReport = 0;
    this.logger.info({ redis: this.where }, `${this.where} answers again`);
  }
}

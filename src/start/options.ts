import type { EventHandler } from '../shared/events.js';
import type { Logger } from '../shared/logger.js';
import type { TurnParts } from '../worker/turn/turn-deps.js';

/** A part of chatlane a process runs: what `chatlane <role>` starts, and `startChatlane({ roles })`. */
export type ChatlaneRole = 'ingress' | 'worker' | 'compactor' | 'delivery';

/** Every role, in the order a process prepares them: the job-taking roles, then the ingress. */
export const CHATLANE_ROLES: readonly ChatlaneRole[] = ['worker', 'compactor', 'delivery', 'ingress'];

/**
 * What a turn is built from in code rather than from the environment: the model, the
 * program's own tools, the pipeline's stages, the instructions. Each optional; absent, the
 * configuration's. (The worker's `TurnParts` without what a process makes for itself.)
 */
export type ChatlaneTurnParts = Omit<TurnParts, 'metrics' | 'capabilities' | 'providers'>;

/** The options of `startChatlane`. Every one is optional. */
export interface ChatlaneOptions extends ChatlaneTurnParts {
  /**
   * The roles this process runs, any of `'ingress' | 'worker' | 'compactor' | 'delivery'`.
   * Default: ingress, worker and compactor, as `chatlane all`. With both `worker` and
   * `delivery`, the worker delivers (one sender registry, whatever DELIVERY_IN_WORKER says).
   */
  roles?: readonly ChatlaneRole[];
  /**
   * The environment variables chatlane reads (docs/configuration.md), parsed by the same
   * schema as the CLI's: a bad value throws the `ConfigError` the CLI prints, naming the
   * variable. Default: `process.env`.
   */
  env?: Readonly<Record<string, string | undefined>>;
  /**
   * A pino logger for chatlane's lines. Default: JSON lines on stdout at LOG_LEVEL, named
   * `chatlane-<role>` (or `chatlane-all` for several roles).
   */
  logger?: Logger;
  /**
   * Start chatlane's OpenTelemetry SDK when the environment names an OTLP endpoint
   * (OTEL_EXPORTER_OTLP_ENDPOINT or OTEL_EXPORTER_OTLP_TRACES_ENDPOINT), as the CLI does.
   * Default true; `false` leaves OpenTelemetry to the program (docs/library.md, "Tracing").
   */
  tracing?: boolean;
  /**
   * Called with each event this process's roles write (a committed or failed turn, a
   * compaction, a takeover, a delivery given up: docs/events.md), as a typed object. It may be
   * async; chatlane never waits for it, and a handler that throws is logged and never fails a
   * turn. Without one, nothing about the writes changes.
   */
  onEvent?: EventHandler;
}

/** A running chatlane: what `startChatlane` returns. */
export interface Chatlane {
  /** The roles it runs, in the order they were started. */
  readonly roles: readonly ChatlaneRole[];
  /** The ingress's base URL (with the `ingress` role), e.g. `http://127.0.0.1:3000`. */
  readonly url: string | undefined;
  /**
   * The side server's base URL (`/metrics`, `/healthz`, `/readyz` on METRICS_PORT) of the
   * worker, delivery or compactor role; undefined with the ingress alone, which serves them
   * on its own port.
   */
  readonly metricsUrl: string | undefined;
  /**
   * Stops it as SIGTERM stops the CLI: the ingress refuses new requests (503) and finishes
   * those in flight; workers stop taking jobs and let running turns finish for up to
   * SHUTDOWN_GRACE_MS, then stop them (another worker retries them at once). Every
   * connection, server, timer and tool client it opened is released, so a program that
   * started nothing else exits by itself afterwards. Idempotent: later calls return the
   * first call's promise.
   */
  close(): Promise<void>;
}

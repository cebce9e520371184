import type { RunningTracing } from './sdk.js';
import type { TracingSettings } from './settings.js';

export type { RunningTracing };

/**
 * The process's tracing SDK and how many holders it has. OpenTelemetry's tracer provider,
 * context manager and module hooks are process-wide by nature, so a process has one SDK
 * however many chatlane instances it runs: the first start makes it (with the first
 * settings), each later one shares it, and it is shut down when the last holder lets go.
 */
let shared: { running: Promise<RunningTracing>; holders: number } | undefined;

/**
 * Starts tracing for this process when `settings` (an OTLP endpoint) is there; otherwise does
 * nothing and loads nothing: the SDK, its exporters and instrumentations are imported only
 * here, only then. Must run before the role modules are imported (src/cli.ts, startChatlane),
 * so that the instrumented packages are patched as they load. Already running in this process:
 * the same SDK, held once more; each `shutdown()` lets go of one hold.
 */
export async function startTracing(
  settings: TracingSettings | undefined,
): Promise<RunningTracing | undefined> {
  if (!settings) return undefined;
  if (!shared) {
    const running = import('./sdk.js').then(({ startSdk }) => startSdk(settings));
    shared = { running, holders: 0 };
    running.catch(() => {
      shared = undefined;
    });
  }
  const held = shared;
  held.holders += 1;
  const running = await held.running;
  let released = false;
  return {
    exporter: running.exporter,
    async shutdown() {
      if (released) return;
      released = true;
      held.holders -= 1;
      if (held.holders > 0) return;
      if (shared === held) shared = undefined;
      await running.shutdown();
    },
  };
}

import type { RunningTracing } from './sdk.js';
import type { TracingSettings } from './settings.js';

export type { RunningTracing };

/**
 * Starts tracing for this process when `settings` (an OTLP endpoint) is there; otherwise does
 * nothing and loads nothing: the SDK, its exporters and instrumentations are imported only
 * here, only then. Must run before the role modules are imported (src/cli.ts), so that the
 * instrumented packages are patched as they load.
 */
export async function startTracing(
  settings: TracingSettings | undefined,
): Promise<RunningTracing | undefined> {
  if (!settings) return undefined;
  const { startSdk } = await import('./sdk.js');
  return startSdk(settings);
}

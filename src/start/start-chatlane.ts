import { loadConfig } from '../shared/config.js';
import { launch } from './launch.js';
import type { Chatlane, ChatlaneOptions } from './options.js';

/**
 * Starts chatlane's roles in this process, configured from `options.env` (default
 * `process.env`) by the same schema as the CLI, with the parts given in code (model, tools,
 * stages, instructions). It runs the code path `chatlane <role>` runs (./launch.ts).
 *
 * Throws a `ConfigError` naming the variable or option at fault before anything is opened;
 * a start that fails later closes what it opened before it throws.
 *
 * @example
 * ```ts
 * import { startChatlane } from 'chatlane';
 *
 * const lane = await startChatlane({ roles: ['ingress', 'worker'], instructions: 'You are the order desk.' });
 * process.once('SIGTERM', () => void lane.close());
 * ```
 */
export async function startChatlane(options: ChatlaneOptions = {}): Promise<Chatlane> {
  // Absent, loadConfig reads process.env (the only module that does).
  const config = loadConfig(options.env);
  return launch(config, options);
}

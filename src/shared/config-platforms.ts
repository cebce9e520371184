import type { PlatformVariable } from './platforms/platform.js';
import { PLATFORMS } from './platforms/registry.js';

/**
 * The chat platforms' variables in the configuration reference. They are not in the config
 * schema: each platform module reads its own (the adapters' names) and lists them in
 * `variables` (src/shared/platforms/platform.ts, point 2), which is where these come from.
 */

export interface PlatformVariableDoc extends PlatformVariable {
  /** The module's name: telegram, slack, … */
  platform: string;
}

/** Whose behaviour they change: the ingress receives, workers and delivery processes send. */
export const PLATFORM_ROLES: readonly string[] = ['ingress', 'worker', 'delivery', 'all'];

export const PLATFORMS_GROUP = {
  title: 'Chat platforms',
  intro:
    'Each platform is turned on by setting any of its variables; then its required ones must be set too, or the process stops naming the missing one. Read by the ingress, workers and delivery processes; how to set each platform up: docs/platforms.md.',
};

/** Every platform module's variables, platform by platform. */
export function platformReference(): PlatformVariableDoc[] {
  return PLATFORMS.flatMap((m) => m.variables.map((v) => ({ platform: m.name, ...v })));
}

import { discord } from './discord.js';
import { gchat } from './gchat.js';
import type { EnabledPlatform, PlatformModule } from './platform.js';
import { slack } from './slack.js';
import { teams } from './teams.js';
import { telegram } from './telegram.js';
import { whatsapp } from './whatsapp.js';

/**
 * Every platform chatlane can talk to, one module each. THE MODULE CONTRACT is written at the
 * top of ./platform.ts (`PlatformModule`): read it before adding one. To add a platform:
 *
 *   1. write src/shared/platforms/<name>.ts exporting a `PlatformModule` (env detection with
 *      half-config problems naming the variable, adapter construction, chatKey mapping both
 *      ways, message metadata, group/mention rule, attachment notes);
 *   2. list it in `PLATFORMS` below;
 *   3. nothing else: config.ts validates its variables at boot, the ingress mounts
 *      `POST /webhooks/<name>` and logs it as enabled, `createSenders` registers a Chat SDK
 *      sender for `route.channel = <name>`, the start-up check stops the process on a
 *      half-configured platform;
 *   4. test it end to end against a local fake of the platform's API (see
 *      test/integration/telegram-webhook.test.ts and src/fake-telegram/server.ts), and
 *      add its subsection to docs/platforms.md.
 */
export const PLATFORMS: readonly PlatformModule<unknown>[] = [
  telegram,
  slack,
  whatsapp,
  discord,
  teams,
  gchat,
];

/** Names that cannot be platforms: they are other routes under /webhooks. */
const RESERVED = new Set(['generic']);

/**
 * The platforms the environment turns on, and every half-configured one's problems (each
 * naming its variable). Called by config.ts only.
 */
export function platformsFromEnv(env: Readonly<Record<string, string>>): {
  platforms: EnabledPlatform[];
  problems: string[];
} {
  const platforms: EnabledPlatform[] = [];
  const problems: string[] = [];
  for (const module of PLATFORMS) {
    if (RESERVED.has(module.name)) throw new Error(`platform name '${module.name}' is reserved`);
    const result = module.fromEnv(env);
    if (!result.enabled) continue;
    if ('problems' in result) problems.push(...result.problems.map((p) => `  ${p}`));
    else platforms.push({ module, settings: result.settings });
  }
  return { platforms, problems };
}

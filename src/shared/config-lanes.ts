import { z } from 'zod';
import { int } from './config-values.js';
import {
  DEFAULT_LANE_SETTINGS,
  LANE_POLICY_NAMES,
  LanePolicies,
  type LanePolicyName,
  type LaneSettings,
} from './lane-policy.js';

/**
 * Lane policies (docs/lane-policies.md): the defaults are schema variables; each channel may
 * override any of them with `<CHANNEL>_LANE_POLICY`, `<CHANNEL>_LANE_DEBOUNCE_MS`,
 * `<CHANNEL>_LANE_DEBOUNCE_MAX_MS` and `<CHANNEL>_LANE_MAX_INTERRUPTS`, read from the
 * environment map config.ts hands over (as the generic sources' secrets are).
 */
export const laneShape = () => ({
  LANE_POLICY: z
    .enum(LANE_POLICY_NAMES as [LanePolicyName, ...LanePolicyName[]])
    .default('merge')
    .describe(
      'what a message does to a running turn: merge (folded in at the next step boundary) or interrupt (aborts the model call under way; the step restarts with it)',
    ),
  LANE_DEBOUNCE_MS: int(0, 0).describe(
    "an idle chat's turn starts once no message has arrived for this long (0: at once); per channel: <CHANNEL>_LANE_DEBOUNCE_MS, the web channel keeps 0",
  ),
  LANE_DEBOUNCE_MAX_MS: z.coerce
    .number()
    .int()
    .min(0)
    .optional()
    .describe(
      "longest a debounced turn waits after the burst's first message, however many follow (default 4 x LANE_DEBOUNCE_MS)",
    ),
  LANE_MAX_INTERRUPTS: int(DEFAULT_LANE_SETTINGS.maxInterrupts, 0).describe(
    'LANE_POLICY=interrupt: model calls one turn may have aborted by new messages; later messages are merged',
  ),
});

type LaneVars = {
  LANE_POLICY: LanePolicyName;
  LANE_DEBOUNCE_MS: number;
  LANE_DEBOUNCE_MAX_MS?: number | undefined;
  LANE_MAX_INTERRUPTS: number;
};

/** The channels that may have settings of their own, besides every platform and generic source. */
const BUILT_IN_CHANNELS = ['web', 'api', 'generic'];

/** The web channel's debounce stays 0 unless WEB_LANE_DEBOUNCE_MS says otherwise: its user waits on the stream. */
const WEB = 'web';

/** `<CHANNEL>_LANE_<FIELD>` of a channel name (`generic:crm-bot` → GENERIC_CRM_BOT_LANE_...). */
export function laneVariable(channel: string, field: string): string {
  return `${channel.toUpperCase().replace(/[^A-Z0-9]/g, '_')}_LANE_${field}`;
}

const nonNegative = /^\d+$/;

/**
 * The lane settings of the defaults and of every channel that overrides one of them. A channel
 * inherits what it does not set: a generic source from `generic`, every channel from the
 * defaults (the web channel's debounce excepted). A channel's max wait, unset, is 4x its own
 * debounce when it sets one. Each problem names its variable.
 */
export function lanePolicies(
  vars: LaneVars,
  env: Readonly<Record<string, string>>,
  names: { platforms: readonly string[]; genericSources: readonly string[] },
): { policies: LanePolicies; issues: string[] } {
  const issues: string[] = [];
  const defaults: LaneSettings = {
    policy: vars.LANE_POLICY,
    debounceMs: vars.LANE_DEBOUNCE_MS,
    debounceMaxMs: vars.LANE_DEBOUNCE_MAX_MS ?? 4 * vars.LANE_DEBOUNCE_MS,
    maxInterrupts: vars.LANE_MAX_INTERRUPTS,
  };
  if (defaults.debounceMaxMs < defaults.debounceMs)
    issues.push(`  LANE_DEBOUNCE_MAX_MS: must not be below LANE_DEBOUNCE_MS (${defaults.debounceMs})`);

  const number = (variable: string): number | undefined => {
    const raw = env[variable];
    if (raw === undefined) return undefined;
    if (!nonNegative.test(raw.trim()) || !Number.isSafeInteger(Number(raw))) {
      issues.push(`  ${variable}: must be a whole number of 0 or more, got '${raw}'`);
      return undefined;
    }
    return Number(raw);
  };
  const channels = new Map<string, LaneSettings>();
  const settle = (channel: string, parent: LaneSettings): LaneSettings => {
    const policyVar = laneVariable(channel, 'POLICY');
    const rawPolicy = env[policyVar];
    let policy = parent.policy;
    if (rawPolicy !== undefined) {
      if ((LANE_POLICY_NAMES as readonly string[]).includes(rawPolicy.trim()))
        policy = rawPolicy.trim() as LanePolicyName;
      else issues.push(`  ${policyVar}: must be merge or interrupt, got '${rawPolicy}'`);
    }
    const debounceVar = laneVariable(channel, 'DEBOUNCE_MS');
    const ownDebounce = number(debounceVar);
    const inheritedDebounce = channel === WEB ? 0 : parent.debounceMs;
    const debounceMs = ownDebounce ?? inheritedDebounce;
    const maxVar = laneVariable(channel, 'DEBOUNCE_MAX_MS');
    const ownMax = number(maxVar);
    const debounceMaxMs =
      ownMax ?? (ownDebounce !== undefined || channel === WEB ? 4 * debounceMs : parent.debounceMaxMs);
    if (debounceMaxMs < debounceMs)
      issues.push(
        `  ${ownMax === undefined ? debounceVar : maxVar}: the max wait must not be below the debounce`,
      );
    const maxInterrupts = number(laneVariable(channel, 'MAX_INTERRUPTS')) ?? parent.maxInterrupts;
    const settings = { policy, debounceMs, debounceMaxMs, maxInterrupts };
    const same =
      settings.policy === parent.policy &&
      settings.debounceMs === parent.debounceMs &&
      settings.debounceMaxMs === parent.debounceMaxMs &&
      settings.maxInterrupts === parent.maxInterrupts;
    if (!same || channel === WEB) channels.set(channel, settings);
    return settings;
  };
  for (const channel of new Set([...BUILT_IN_CHANNELS, ...names.platforms])) {
    if (channel !== 'generic') settle(channel, defaults);
  }
  const generic = settle('generic', defaults);
  for (const source of names.genericSources) settle(`generic:${source}`, generic);
  return { policies: new LanePolicies(defaults, channels), issues };
}

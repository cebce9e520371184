import type { MessageMetadata } from './messages.js';

/**
 * What a chat's lane does with a message that finds it idle or busy (docs/lane-policies.md):
 *
 * - `merge` (the default): a message that arrives while a turn runs is folded into it at the
 *   next step boundary; otherwise it waits for the next turn.
 * - `interrupt`: a message that arrives while the turn's model call is under way aborts that
 *   call at once; the step restarts with the message folded in (at most `maxInterrupts` times
 *   a turn, then as `merge`).
 *
 * `debounceMs` (0: off) applies to an idle lane only: its turn starts once no message has
 * arrived for that long, at the latest `debounceMaxMs` after the first message of the burst.
 */
export type LanePolicyName = 'merge' | 'interrupt';

export const LANE_POLICY_NAMES: readonly LanePolicyName[] = ['merge', 'interrupt'];

export interface LaneSettings {
  policy: LanePolicyName;
  debounceMs: number;
  debounceMaxMs: number;
  maxInterrupts: number;
}

export const DEFAULT_LANE_SETTINGS: LaneSettings = {
  policy: 'merge',
  debounceMs: 0,
  debounceMaxMs: 0,
  maxInterrupts: 3,
};

/** The message fields a lane's settings are chosen by. */
export type LaneMessage = Pick<MessageMetadata, 'channel' | 'extra'>;

/**
 * The lane settings of each channel: a message is handled by the settings of its channel
 * (`metadata.channel`: a platform's name, `web` for /v1/ui, `api` for the HTTP API unless the
 * caller names another, `generic` for signed webhooks), a signed webhook's by its source's
 * first (`generic:<source>`, from `metadata.extra.source`), and anything else by the defaults.
 */
export class LanePolicies {
  /** Whether any channel interrupts: otherwise no process needs to watch for arrivals. */
  readonly anyInterrupt: boolean;
  /** Whether any channel debounces: otherwise ingest reads nothing for it. */
  readonly anyDebounce: boolean;

  constructor(
    readonly defaults: LaneSettings = DEFAULT_LANE_SETTINGS,
    private readonly channels: ReadonlyMap<string, LaneSettings> = new Map(),
  ) {
    const all = [defaults, ...channels.values()];
    this.anyInterrupt = all.some((s) => s.policy === 'interrupt' && s.maxInterrupts > 0);
    this.anyDebounce = all.some((s) => s.debounceMs > 0);
  }

  /** The settings of `name` (a channel, or `generic:<source>`), or the defaults. */
  named(name: string): LaneSettings {
    return this.channels.get(name) ?? this.defaults;
  }

  /** The settings a message is handled by. */
  of(metadata: LaneMessage | undefined): LaneSettings {
    const channel = metadata?.channel;
    if (channel === undefined) return this.defaults;
    const source = metadata?.extra?.source;
    if (typeof source === 'string') {
      const bySource = this.channels.get(`${channel}:${source}`);
      if (bySource) return bySource;
    }
    return this.channels.get(channel) ?? this.defaults;
  }
}

/** Every message is merged, none is debounced: chatlane's behaviour without lane settings. */
export const MERGE_ONLY = new LanePolicies();

import type { LanguageModel } from 'ai';
import { type Config, requireCompactionModel } from '../../shared/config.js';
import type { Logger } from '../../shared/logger.js';
import { createMetrics, type Metrics } from '../../shared/metrics.js';
import type { ChatStore } from '../../shared/store/chat-store.js';
import type { ModelHealth } from '../agent/model-health.js';
import type { ProviderFactories } from '../agent/providers.js';
import { givenModel, roleModel } from '../agent/role-model.js';
import type { CompactionDeps } from './compact.js';

/** What compaction is built from besides the configuration; each optional. */
export interface CompactionParts {
  /** The instance's metrics (default: a registry of its own). */
  metrics?: Metrics;
  providers?: ProviderFactories;
  /**
   * A model given in code in place of LLM_MODEL: it summarises too, unless COMPACTION_MODEL
   * names one for summaries.
   */
  model?: LanguageModel;
}

export function compactionDepsFromConfig(
  config: Config,
  store: ChatStore,
  logger: Logger,
  parts: CompactionParts = {},
): CompactionDeps & { modelHealth: ModelHealth } {
  const metrics = parts.metrics ?? createMetrics();
  const common = { metrics, timeoutMs: config.LLM_TIMEOUT_MS, prices: config.MODEL_PRICES };
  const configured = parts.model && !config.COMPACTION_MODEL ? undefined : requireCompactionModel(config);
  const { model, health } = configured
    ? roleModel(configured, { ...common, logger, providers: parts.providers })
    : givenModel(parts.model!, common);
  return {
    store,
    model,
    modelName: configured ? configured.models[0]!.id : Object.keys(health.models())[0]!,
    modelHealth: health,
    logger,
    settings: {
      keepLast: config.HISTORY_KEEP_LAST_MESSAGES,
      keepRecentTokens: config.KEEP_RECENT_TOKENS,
      maxOutputTokens: config.COMPACTION_MAX_TOKENS,
      archive: config.ARCHIVE_ON_COMPACT,
      maxEvents: config.EVENTS_MAX_LEN,
      maxCharsPerMessage: config.MAX_CHARS_PER_MESSAGE,
    },
  };
}

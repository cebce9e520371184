import { type Config, requireCompactionModel } from '../../shared/config.js';
import type { Logger } from '../../shared/logger.js';
import { processMetrics } from '../../shared/metrics.js';
import type { ChatStore } from '../../shared/store/chat-store.js';
import type { ModelHealth } from '../agent/model-health.js';
import type { ProviderFactories } from '../agent/providers.js';
import { roleModel } from '../agent/role-model.js';
import type { CompactionDeps } from './compact.js';

export function compactionDepsFromConfig(
  config: Config,
  store: ChatStore,
  logger: Logger,
  providers?: ProviderFactories,
): CompactionDeps & { modelHealth: ModelHealth } {
  const models = requireCompactionModel(config);
  const { model, health } = roleModel(models, {
    metrics: processMetrics(),
    logger,
    timeoutMs: config.LLM_TIMEOUT_MS,
    providers,
    prices: config.MODEL_PRICES,
  });
  return {
    store,
    model,
    modelName: models.models[0]!.id,
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

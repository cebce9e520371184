import type { Config } from '../config.js';
import type { Logger } from '../logger.js';
import { standardSources } from '../webhooks/standard.js';
import { GenericWebhookSender } from './generic-sender.js';
import { SenderRegistry } from './sender.js';

/** What GENERIC_WEBHOOK_REPLY_* say about reply URLs. */
export function replyUrlPolicy(config: Config) {
  return { allowHttp: config.GENERIC_WEBHOOK_REPLY_ALLOW_HTTP, hosts: config.GENERIC_WEBHOOK_REPLY_HOSTS };
}

/**
 * The senders a delivery process registers, from configuration: one per channel whose
 * credentials are set. Each channel's module adds its sender here.
 */
export function createSenders(config: Config, _logger: Logger): SenderRegistry {
  const registry = new SenderRegistry();
  if (config.GENERIC_WEBHOOKS.length > 0) {
    registry.register(
      new GenericWebhookSender(standardSources(config.GENERIC_WEBHOOKS), replyUrlPolicy(config)),
    );
  }
  return registry;
}

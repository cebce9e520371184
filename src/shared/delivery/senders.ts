import type { Config } from '../config.js';
import type { Logger } from '../logger.js';
import { SenderRegistry } from './sender.js';

/** What GENERIC_WEBHOOK_REPLY_* say about reply URLs. */
export function replyUrlPolicy(config: Config) {
  return { allowHttp: config.GENERIC_WEBHOOK_REPLY_ALLOW_HTTP, hosts: config.GENERIC_WEBHOOK_REPLY_HOSTS };
}

/**
 * The senders a delivery process registers, from configuration: one per channel whose
 * credentials are set. Each channel's module adds its sender here. The Chat SDK (and its
 * Markdown stack) is imported only when a platform is configured: a process without one
 * would hold megabytes of module code it never runs. Likewise the generic webhook sender and
 * the Standard Webhooks signing code (standardwebhooks, @stablelib/base64, fast-sha256) only
 * when a signed generic webhook source is.
 */
export async function createSenders(config: Config, logger: Logger): Promise<SenderRegistry> {
  const registry = new SenderRegistry();
  if (config.PLATFORMS.length > 0) {
    const { ChatSdkSender, lazyPlatformRuntime } = await import('./chat-sdk-sender.js');
    // One Chat SDK runtime for every platform, built on the first send.
    const runtime = lazyPlatformRuntime(config, logger);
    for (const { module } of config.PLATFORMS) {
      registry.register(new ChatSdkSender(module.name, runtime.get, module.typing, module.replies));
    }
    registry.onClose(runtime.close);
  }
  if (config.GENERIC_WEBHOOKS.length > 0) {
    const [{ standardSources }, { GenericWebhookSender }] = await Promise.all([
      import('../webhooks/standard.js'),
      import('./generic-sender.js'),
    ]);
    registry.register(
      new GenericWebhookSender(standardSources(config.GENERIC_WEBHOOKS), replyUrlPolicy(config)),
    );
  }
  return registry;
}

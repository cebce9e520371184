import type { Config } from '../config.js';
import type { Logger } from '../logger.js';
import { SenderRegistry } from './sender.js';

/**
 * The senders a delivery process registers, from configuration: one per channel whose
 * credentials are set. Each channel's module adds its sender here.
 */
export function createSenders(_config: Config, _logger: Logger): SenderRegistry {
  return new SenderRegistry();
}

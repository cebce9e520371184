import type { Logger as ChatLogger } from 'chat';
import type { Logger } from '../logger.js';

/**
 * The Chat SDK's logger interface over pino. The SDK logs `(message, ...details)`; details
 * go into the line's `details` field. Its `info` chatter (polling started, webhook reset) is
 * kept at debug so a busy process's log stays chatlane's own.
 */
export function chatSdkLogger(logger: Logger): ChatLogger {
  const line =
    (level: 'debug' | 'warn' | 'error') =>
    (message: string, ...details: unknown[]) => {
      const fields = details.length === 0 ? {} : { details: details.length === 1 ? details[0] : details };
      logger[level](fields, message);
    };
  return {
    child: (prefix: string) => chatSdkLogger(logger.child({ sdk: prefix })),
    debug: line('debug'),
    info: line('debug'),
    warn: line('warn'),
    error: line('error'),
  };
}

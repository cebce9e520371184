import { expect } from 'vitest';
import { ConfigError } from '../../src/shared/config.js';

/** The ConfigError thrown by `fn`; fails the test when nothing or something else is thrown. */
export function configErrorOf(fn: () => unknown): ConfigError {
  try {
    fn();
  } catch (err) {
    expect(err).toBeInstanceOf(ConfigError);
    return err as ConfigError;
  }
  throw new Error('expected a ConfigError, nothing was thrown');
}

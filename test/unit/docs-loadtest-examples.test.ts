import { describe, expect, it } from 'vitest';
import { parseLoadtestArgs } from '../../src/loadtest/options.js';
import { docBlock } from '../helpers/docs.js';

/**
 * docs/load-testing.md's `chatlane loadtest` command is one the load test accepts, with the
 * values the page says it sets. (The load test itself runs end to end in test/e2e/loadtest.test.ts.)
 */

/** The shell words of a documented command, backslash-continued lines joined. */
function words(command: string): string[] {
  return command
    .replace(/\\\n\s*/g, ' ')
    .trim()
    .split(/\s+/);
}

describe('docs/load-testing.md examples', () => {
  it('the chatlane loadtest command parses with the documented values', () => {
    const block = docBlock('sh', 'chatlane loadtest --url');
    const [cli, role, ...args] = words(block.code);
    expect([cli, role]).toEqual(['chatlane', 'loadtest']);
    const opts = parseLoadtestArgs(args);
    expect(opts).not.toBe('help');
    expect(opts).toMatchObject({ chats: 200, messages: 5, rate: 50, out: 'report.json' });
  });
});

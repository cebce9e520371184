import { mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { ConfigError, loadConfig } from '../../src/shared/config.js';
import { costOfTokens, parsePriceFile } from '../../src/shared/prices.js';

const dir = mkdtempSync(join(tmpdir(), 'chatlane-prices-'));
function file(name: string, text: string): string {
  const path = join(dir, name);
  writeFileSync(path, text);
  return path;
}

const tokens = (input: number, cached: number, written: number, output: number) => ({
  input,
  cached_input: cached,
  cache_write: written,
  output,
  reasoning: 0,
});

describe('MODEL_PRICES_FILE', () => {
  it('reads YAML and JSON alike, and prices a model by its id or the longest listed id it starts with', () => {
    const yaml = file(
      'p.yaml',
      'currency: USD\nmodels:\n  gpt-4o: { input: 2.5, cached_input: 1.25, output: 10 }\n  gpt-4o-mini:\n    input: 0.15\n    output: 0.6\n',
    );
    const json = file(
      'p.json',
      JSON.stringify({ models: { 'gpt-4o': { input: 2.5, cached_input: 1.25, output: 10 } } }),
    );
    const fromYaml = loadConfig({ MODEL_PRICES_FILE: yaml }).MODEL_PRICES!;
    const fromJson = loadConfig({ MODEL_PRICES_FILE: json }).MODEL_PRICES!;
    expect(fromYaml.priceOf('gpt-4o')).toEqual(fromJson.priceOf('gpt-4o'));
    expect(fromYaml.priceOf('gpt-4o-2024-08-06')?.input).toBe(2.5);
    expect(fromYaml.priceOf('gpt-4o-mini-2024-07-18')?.input).toBe(0.15);
    expect(fromYaml.priceOf('claude')).toBeUndefined();
    expect(loadConfig({}).MODEL_PRICES).toBeUndefined();
  });

  it('prices a provider:model id by its whole id first, then by the model alone', () => {
    const table = loadConfig({
      MODEL_PRICES_FILE: file(
        'q.yaml',
        'models:\n  openai:gpt-4o: { input: 5, output: 20 }\n  gpt-4o: { input: 2.5, output: 10 }\n',
      ),
    }).MODEL_PRICES!;
    expect(table.priceOf('openai:gpt-4o')?.input).toBe(5);
    expect(table.priceOf('openai:gpt-4o-2024-08-06')?.input).toBe(5);
    expect(table.priceOf('openai-compatible:gpt-4o')?.input).toBe(2.5);
    expect(table.priceOf('anthropic:claude-sonnet')).toBeUndefined();
  });

  it('bills full-price, cached and cache-written input apart, the cache kinds at the input price unless listed', () => {
    expect(costOfTokens({ input: 2, output: 8 }, tokens(1_000_000, 600_000, 100_000, 500_000))).toBeCloseTo(
      2 + 4,
      10,
    );
    expect(
      costOfTokens(
        { input: 2, cached_input: 0.2, cache_write: 2.5, output: 8 },
        tokens(1_000_000, 600_000, 100_000, 0),
      ),
    ).toBeCloseTo(0.3 * 2 + 0.6 * 0.2 + 0.1 * 2.5, 10);
  });

  it.each([
    [
      'a file that is not there',
      join(dir, 'missing.yaml'),
      /MODEL_PRICES_FILE: cannot read .*missing\.yaml: ENOENT/,
    ],
    [
      'text that is not JSON or YAML',
      file('bad.yaml', 'models: [unclosed'),
      /MODEL_PRICES_FILE: .*not JSON or YAML/,
    ],
    ['no models', file('empty.json', '{}'), /MODEL_PRICES_FILE: .*models: /],
    [
      'a negative price',
      file('neg.json', '{"models":{"m":{"input":-1,"output":1}}}'),
      /MODEL_PRICES_FILE: .*models\.m\.input/,
    ],
    [
      'a price as a string',
      file('str.yaml', 'models:\n  m: { input: "1", output: 1 }\n'),
      /MODEL_PRICES_FILE: .*models\.m\.input/,
    ],
    [
      'an unknown kind',
      file('kind.json', '{"models":{"m":{"input":1,"output":1,"audio":3}}}'),
      /MODEL_PRICES_FILE: .*audio/,
    ],
    [
      'an output price missing',
      file('out.json', '{"models":{"m":{"input":1}}}'),
      /MODEL_PRICES_FILE: .*models\.m\.output/,
    ],
  ])('stops the configuration naming the variable for %s', (_what, path, message) => {
    expect(() => loadConfig({ MODEL_PRICES_FILE: path })).toThrow(ConfigError);
    expect(() => loadConfig({ MODEL_PRICES_FILE: path })).toThrow(message);
  });

  it('parses a price file text on its own (the loader and the tests share it)', () => {
    expect(typeof parsePriceFile('models: {}')).not.toBe('string');
    expect(parsePriceFile('[1, 2]')).toMatch(/expected object/);
  });
});

describe('CHAT_DAILY_TOKEN_BUDGET', () => {
  it('is off by default and takes a whole number of tokens', () => {
    expect(loadConfig({}).CHAT_DAILY_TOKEN_BUDGET).toBe(0);
    expect(loadConfig({ CHAT_DAILY_TOKEN_BUDGET: '200000' }).CHAT_DAILY_TOKEN_BUDGET).toBe(200_000);
    expect(() => loadConfig({ CHAT_DAILY_TOKEN_BUDGET: '-1' })).toThrow(/CHAT_DAILY_TOKEN_BUDGET/);
    expect(() => loadConfig({ CHAT_DAILY_TOKEN_BUDGET: 'lots' })).toThrow(/CHAT_DAILY_TOKEN_BUDGET/);
  });
});

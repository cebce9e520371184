import { readFileSync } from 'node:fs';
import { createRequire } from 'node:module';
import { z } from 'zod';
import { parseModelId } from './config-models.js';
import type { CallUsage, UsageKind } from './usage.js';

/**
 * MODEL_PRICES_FILE: what a million tokens of each kind cost, per model, in USD. JSON or YAML
 * (YAML reads JSON too). Checked when the configuration is (config.ts): a bad file stops the
 * process naming the variable. docs/usage-and-cost.md shows the format.
 */

const usdPerMillion = z.number().finite().nonnegative();

const modelPriceSchema = z
  .object({
    input: usdPerMillion.describe('input tokens not read from or written to a cache'),
    cached_input: usdPerMillion.optional().describe('input tokens read from the cache (default: input)'),
    cache_write: usdPerMillion.optional().describe('input tokens written to the cache (default: input)'),
    output: usdPerMillion.describe('output tokens, reasoning included'),
  })
  .strict();

const priceFileSchema = z
  .object({
    currency: z.literal('USD').optional(),
    models: z.record(z.string().min(1).max(200), modelPriceSchema),
  })
  .strict();

export type ModelPrice = z.infer<typeof modelPriceSchema>;

/** Prices by model id, looked up exactly, else by the longest id that starts the model's. */
export class PriceTable {
  private readonly byLength: Array<[string, ModelPrice]>;

  constructor(readonly models: Readonly<Record<string, ModelPrice>>) {
    this.byLength = Object.entries(models).sort((a, b) => b[0].length - a[0].length);
  }

  /**
   * The price of a model: its own entry, or the longest listed id that starts it (a provider
   * answers `gpt-4o-2024-08-06` for `gpt-4o`); a `provider:model` id (what LLM_MODEL names
   * and usage records) is looked up whole first, then by its model alone, so a file can list
   * `openai:gpt-4o` or just `gpt-4o`. undefined when none is listed.
   */
  priceOf(model: string): ModelPrice | undefined {
    const bare = parseModelId(model).model;
    for (const id of bare === model ? [model] : [model, bare]) {
      const price = this.models[id] ?? this.byLength.find(([listed]) => id.startsWith(listed))?.[1];
      if (price) return price;
    }
    return undefined;
  }

  /** USD of token counts of one model; undefined when the model has no price. */
  costOf(model: string, tokens: Record<UsageKind, number>): number | undefined {
    const price = this.priceOf(model);
    return price && costOfTokens(price, tokens);
  }

  /** USD of one call; undefined when its model has no price. */
  costOfCall(call: CallUsage): number | undefined {
    return this.costOf(call.model, {
      input: call.inputTokens,
      cached_input: call.cachedInputTokens,
      cache_write: call.cacheWriteTokens,
      output: call.outputTokens,
      reasoning: call.reasoningTokens,
    });
  }
}

/**
 * Input is billed in three parts (full price, cache read, cache write); reasoning tokens are
 * part of the output tokens (the AI SDK counts them there) and are not billed twice.
 */
export function costOfTokens(price: ModelPrice, tokens: Record<UsageKind, number>): number {
  const fullPrice = Math.max(0, tokens.input - tokens.cached_input - tokens.cache_write);
  const usd =
    fullPrice * price.input +
    tokens.cached_input * (price.cached_input ?? price.input) +
    tokens.cache_write * (price.cache_write ?? price.input) +
    tokens.output * price.output;
  return usd / 1_000_000;
}

const require = createRequire(import.meta.url);

/**
 * The YAML parser, loaded with the first price file: ~0.85 MB of heap that every process
 * (config.ts imports this module) would otherwise hold without MODEL_PRICES_FILE, and that
 * each of its major GCs would mark.
 */
function parseYaml(text: string): unknown {
  return (require('yaml') as typeof import('yaml')).parse(text);
}

/** The problem with a price file's text, or its table. */
export function parsePriceFile(text: string): PriceTable | string {
  let raw: unknown;
  try {
    raw = parseYaml(text);
  } catch (err) {
    return `not JSON or YAML: ${(err as Error).message.split('\n')[0]}`;
  }
  const parsed = priceFileSchema.safeParse(raw);
  if (!parsed.success) {
    const issue = parsed.error.issues[0];
    const where = issue && issue.path.length > 0 ? `${issue.path.join('.')}: ` : '';
    return `${where}${issue?.message ?? 'invalid'}`;
  }
  return new PriceTable(parsed.data.models);
}

/** Read and check the file; the problem as a string (the caller names the variable). */
export function loadPriceFile(path: string): PriceTable | string {
  let text: string;
  try {
    text = readFileSync(path, 'utf8');
  } catch (err) {
    return `cannot read ${path}: ${(err as NodeJS.ErrnoException).code ?? (err as Error).message}`;
  }
  const table = parsePriceFile(text);
  return typeof table === 'string' ? `${path}: ${table}` : table;
}

import { customProvider, tool } from 'ai';
import { z } from 'zod';
import { silentLogger } from '../../src/shared/logger.js';
import type { ChatMessage } from '../../src/shared/messages.js';
import { createMetrics } from '../../src/shared/metrics.js';
import type { RedisClient } from '../../src/shared/redis.js';
import { ChatStore } from '../../src/shared/store/chat-store.js';
import type { TurnDeps } from '../../src/worker/turn/turn.js';
import { turnDepsFromConfig } from '../../src/worker/turn/turn-deps.js';
import { newUserTexts, type Script, scriptedModel } from './scripted-model.js';
import { workerConfig } from './worker-config.js';

/**
 * A worker's turn deps with TOOL_APPROVAL=refund=user and a `refund` tool given in code, on an
 * `ai/test` model: "refund <order>" makes the model call refund; the call's result (or its
 * denial) is said back through chat_send; anything else is echoed.
 */
export const refundScript: Script = (prompt) => {
  const last = prompt.at(-1);
  if (last?.role === 'tool') {
    const refund = last.content.find((p) => p.type === 'tool-result' && p.toolName === 'refund');
    if (refund && refund.type === 'tool-result')
      return {
        toolCalls: [{ name: 'chat_send', input: { text: `refund: ${JSON.stringify(refund.output)}` } }],
      };
    return { text: '' };
  }
  const said = newUserTexts(prompt).at(-1) ?? '';
  const m = /^refund (\w+)/.exec(said);
  if (m) return { toolCalls: [{ name: 'refund', input: { order: m[1] } }] };
  return { toolCalls: [{ name: 'chat_send', input: { text: `echo: ${said}` } }] };
};

export interface RefundWorker {
  deps: TurnDeps;
  store: ChatStore;
  /** The orders refunded, in order: one entry per run of the tool. */
  runs: string[];
  metrics: ReturnType<typeof createMetrics>;
  prompts: ReturnType<typeof scriptedModel>['prompts'];
}

export function refundWorker(
  redis: RedisClient,
  prefix: string,
  env: Record<string, string> = {},
  script: Script = refundScript,
): RefundWorker {
  const { model, prompts } = scriptedModel(script);
  const runs: string[] = [];
  const refund = tool({
    inputSchema: z.object({ order: z.string() }),
    execute: async ({ order }) => {
      runs.push(order);
      return { refunded: order };
    },
  });
  const config = workerConfig(prefix, 'http://model.invalid/v1', {
    TOOL_APPROVAL: 'refund=user',
    TURN_LEASE_MS: '2000',
    ...env,
  });
  const store = new ChatStore(redis, { prefix, maxEvents: 500 });
  const metrics = createMetrics({ defaultMetrics: false });
  const deps = turnDepsFromConfig(config, store, silentLogger(), {
    metrics,
    tools: { refund },
    providers: { 'openai-compatible': () => customProvider({ languageModels: { mock: model } }) },
  });
  return { deps, store, runs, metrics, prompts };
}

export type ToolPart = {
  type: string;
  state: string;
  toolCallId: string;
  input?: unknown;
  output?: unknown;
  errorText?: string;
  approval?: { id: string; approved?: boolean; reason?: string; signature?: string };
};

/** The parts of `name`'s calls in `history`, oldest first. */
export function toolParts(history: ChatMessage[], name: string): ToolPart[] {
  return history.flatMap((m) => m.parts).filter((p) => p.type === `tool-${name}`) as unknown as ToolPart[];
}

import { MockLanguageModelV4 } from 'ai/test';
import { startDesk } from './desk.js';
import { refundsMade } from './orders.js';

/**
 * `npm test`: the order desk end to end without a model provider — the AI SDK's test model
 * plays a customer service agent by script, against a real Redis (REDIS_URL). It checks what
 * the example is for: the tools get the chat, `once` refunds once although the model asks
 * twice, and the retrieved refund policy reaches the model.
 */

type CallOptions = Parameters<MockLanguageModelV4['doStream']>[0];
type Prompt = CallOptions['prompt'];
type StreamResult = Awaited<ReturnType<MockLanguageModelV4['doStream']>>;
type GenerateResult = Awaited<ReturnType<MockLanguageModelV4['doGenerate']>>;
type Part = StreamResult['stream'] extends ReadableStream<infer P> ? P : never;

const usage = {
  inputTokens: { total: 10, noCache: 10, cacheRead: undefined, cacheWrite: undefined },
  outputTokens: { total: 5, text: 5, reasoning: undefined },
};

/** The results of the tools called so far in this turn, by tool name. */
function results(prompt: Prompt): Array<{ tool: string; output: unknown }> {
  return prompt.flatMap((m) =>
    m.role === 'tool'
      ? m.content.flatMap((p) =>
          p.type === 'tool-result'
            ? [{ tool: p.toolName, output: 'value' in p.output ? p.output.value : p.output }]
            : [],
        )
      : [],
  );
}

/** The agent, by script: look the order up, refund it, ask to refund it again, answer. */
function next(prompt: Prompt): { tool: string; input: unknown } | undefined {
  const done = results(prompt).map((r) => r.tool);
  const count = (tool: string) => done.filter((t) => t === tool).length;
  if (count('lookup_order') === 0) return { tool: 'lookup_order', input: { orderId: 'A-1001' } };
  if (count('refund_order') < 2)
    return { tool: 'refund_order', input: { orderId: 'A-1001', reason: 'arrived broken' } };
  if (count('chat_send') === 0) return { tool: 'chat_send', input: { text: 'Your teapot is refunded.' } };
  return undefined;
}

const prompts: Prompt[] = [];
let callId = 0;
/** The scripted answer as a model stream (a turn someone watches calls streamText). */
async function answer(options: CallOptions): Promise<StreamResult> {
  prompts.push(options.prompt);
  const call = next(options.prompt);
  const parts: Part[] = [{ type: 'stream-start', warnings: [] }];
  if (call) {
    parts.push({
      type: 'tool-call',
      toolCallId: `call-${++callId}`,
      toolName: call.tool,
      input: JSON.stringify(call.input),
    });
  }
  parts.push({
    type: 'finish',
    usage,
    finishReason: call ? { unified: 'tool-calls', raw: 'tool_calls' } : { unified: 'stop', raw: 'stop' },
  });
  return {
    stream: new ReadableStream<Part>({
      start(controller) {
        for (const part of parts) controller.enqueue(part);
        controller.close();
      },
    }),
  };
}

/** The same answer whole: a turn nobody watches calls generateText. */
async function whole(options: CallOptions): Promise<GenerateResult> {
  const content: GenerateResult['content'] = [];
  let finishReason: GenerateResult['finishReason'] = { unified: 'stop', raw: 'stop' };
  for await (const part of (await answer(options)).stream as unknown as AsyncIterable<Part>) {
    if (part.type === 'tool-call') content.push(part);
    else if (part.type === 'finish') finishReason = part.finishReason;
  }
  return { content, finishReason, usage, warnings: [] };
}

const model = new MockLanguageModelV4({ doStream: answer, doGenerate: whole });

const env = {
  ...process.env,
  HOST: '127.0.0.1',
  PORT: '0',
  METRICS_PORT: '0',
  LOG_LEVEL: process.env.LOG_LEVEL ?? 'warn',
};
const lane = await startDesk({ model, env });
const failures: string[] = [];
try {
  const posted = await fetch(`${lane.url}/v1/chats/shop-alice/messages`, {
    method: 'POST',
    headers: { 'content-type': 'application/json' },
    body: JSON.stringify({ id: 'check-1', text: 'My order A-1001 arrived broken. Can I get a refund?' }),
  });
  if (posted.status !== 202) failures.push(`POST answered ${posted.status}`);
  let replies: string[] = [];
  for (let i = 0; i < 300 && replies.length === 0; i++) {
    await new Promise((resolve) => setTimeout(resolve, 100));
    const { items } = (await (await fetch(`${lane.url}/v1/chats/shop-alice/outbox`)).json()) as {
      items: Array<{ text: string }>;
    };
    replies = items.map((item) => item.text);
  }
  if (replies[0] !== 'Your teapot is refunded.') failures.push(`reply: ${JSON.stringify(replies)}`);
  const order = results(prompts.at(-1) ?? []).find((r) => r.tool === 'lookup_order')?.output;
  if ((order as { item?: string } | undefined)?.item !== 'ceramic teapot')
    failures.push(`lookup_order did not find the customer's order: ${JSON.stringify(order)}`);
  const refunds = results(prompts.at(-1) ?? []).filter((r) => r.tool === 'refund_order');
  if (refundsMade.length !== 1) failures.push(`${refundsMade.length} refunds made, not 1`);
  if (refunds.length !== 2 || JSON.stringify(refunds[0]?.output) !== JSON.stringify(refunds[1]?.output))
    failures.push(`the second refund_order did not get the first one's result: ${JSON.stringify(refunds)}`);
  if (!JSON.stringify(prompts[0] ?? []).includes('within 30 days of delivery'))
    failures.push('the refund policy did not reach the model');
} finally {
  await lane.close();
}
if (failures.length > 0) {
  console.error(`order desk check failed:\n  ${failures.join('\n  ')}`);
  process.exitCode = 1;
} else {
  console.log(
    'order desk check passed: the tools got the chat, one refund for two requests, the policy reached the model',
  );
}

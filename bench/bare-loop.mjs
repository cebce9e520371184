// The wrapper-overhead anchor: the bare AI SDK `streamText` tool loop (a watched turn of the
// worker streams), its stream read to the end, no queue, no store; with BARE_MODE=generate the
// bare `generateText` loop (what a turn nobody watches runs) with the same options.
// Plain JavaScript on purpose, run with plain `node` like the worker's compiled dist/: neither
// side carries a TypeScript loader. Same provider package and options as the worker
// (src/worker/agent/model.ts, loop.ts), the same `chat_send` tool schema, the same mock model
// over HTTP: step 1 calls chat_send, step 2 stops — 2 model calls per turn.
//
// BARE_TEXT, when set, is every turn's message (the stream benchmark's anchor).
// Protocol (stdin/stdout lines): prints `ready` after its warm-up turns, then for every `go`
// runs BARE_TURNS turns with BARE_CONCURRENCY at once, and for every `go <n> [<k>]` a round of
// n turns, k at a time (all at once without k; the stream benchmark keeps one process through
// its rounds, as its workers live through theirs); after each it prints `done <turns>
// <modelSteps>`. It exits when stdin ends. The parent reads this process's CPU and memory from
// /proc.
import { createInterface } from 'node:readline';
import { createOpenAICompatible } from '@ai-sdk/openai-compatible';
import { generateText, isStepCount, streamText, tool, zodSchema } from 'ai';
import { z } from 'zod';

const env = process.env;
const concurrency = Number(env.BARE_CONCURRENCY);
const turns = Number(env.BARE_TURNS);
const warmup = Number(env.BARE_WARMUP ?? '0');
const prefix = env.BARE_CHAT_PREFIX ?? 'bare';
// The stream benchmark's message (its worker side's text); the overhead benchmark's otherwise.
const text = env.BARE_TEXT;
const generate = env.BARE_MODE === 'generate';

const model = createOpenAICompatible({
  name: 'llm',
  baseURL: env.BARE_MOCK_URL,
  includeUsage: true,
}).chatModel('mock');
const INPUT = zodSchema(z.object({ text: z.string().min(1).max(8000) }));
const tools = {
  chat_send: tool({
    // The worker's description, word for word (src/worker/agent/tools/chat-send.ts): the anchor's
    // request must not be longer than chatlane's for the same tool.
    description: 'Send one message to the user in this chat: the only way they see your reply.',
    inputSchema: INPUT,
    execute: async () => ({ status: 'sent', id: '0-0' }),
  }),
};

let steps = 0;
async function turn(chatKey) {
  const options = {
    model,
    // The mock reads the chat key from the system prompt, as it does from the worker's.
    instructions: `You are a helpful assistant.\nChatKey: ${chatKey}\nReply with chat_send.`,
    // The worker side's message, word for word (bench/lib/util.ts seedChats: `message ${m} of
    // ${chatKey}`, m = 0), in a chat named alike: the mock echoes it through chat_send, so both
    // sides stream the same model output (the same SSE events, and the same bytes in them).
    messages: [{ role: 'user', content: text || `message 0 of ${chatKey}` }],
    tools,
    stopWhen: isStepCount(16),
    maxRetries: 2,
  };
  if (generate) {
    steps += (await generateText(options)).steps.length;
    return;
  }
  const result = streamText(options);
  // Read as the worker reads it: every part of the full stream, in order.
  for await (const _part of result.fullStream);
  steps += (await result.steps).length;
}

/** `count` turns, `atOnce` at a time, in chats `<prefix>-<kind><0 … count - 1>` as the worker side names its own. */
async function pool(kind, count, atOnce = concurrency) {
  let next = 0;
  await Promise.all(
    Array.from({ length: Math.min(atOnce, count) }, async () => {
      while (next < count) await turn(`${prefix}-${kind}${next++}`);
    }),
  );
}

await pool('w', warmup);
process.stdout.write('ready\n');
const lines = createInterface({ input: process.stdin });
let rounds = 0;
for await (const line of lines) {
  const [word, n, k] = line.trim().split(' ');
  if (word !== 'go') continue;
  steps = 0;
  if (n === undefined) {
    await pool('c', turns);
    process.stdout.write(`done ${turns} ${steps}\n`);
  } else {
    // Each round in chats of its own: r<round>-<i>.
    await pool(`r${rounds++}-`, Number(n), Number(k ?? n));
    process.stdout.write(`done ${n} ${steps}\n`);
  }
}
// stdin ended (the bench is done with us): exit now, so `--cpu-prof` writes its profile.
process.exit(0);

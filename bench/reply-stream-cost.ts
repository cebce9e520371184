import { DefaultChatTransport, type UIMessageChunk } from 'ai';
import { Redis } from 'ioredis';
import { ensureRedis } from '../src/dev-redis.js';
import { startMockLlm } from '../src/mock-llm/server.js';
import { scripts } from '../src/shared/store/scripts.js';
import { startRole } from '../test/helpers/processes.js';
import { freePort, progress } from './util.js';

/**
 * Redis cost of one streamed reply: `tsx bench/reply-stream-cost.ts [turns] [chunkMs]`
 * (build first). Own redis-server (nothing else in its MONITOR), the mock model streaming
 * `chunkMs` apart, a real ingress and worker; each turn is one POST /v1/ui through the AI
 * SDK's DefaultChatTransport, read to its end. Counts the reply-write script calls and their
 * request bytes from MONITOR, and the reply stream's entries and MEMORY USAGE. Not part of
 * `npm run bench` yet: a first figure for the streaming issue.
 */

const turns = Number(process.argv[2] ?? 20);
const chunkMs = Number(process.argv[3] ?? 20);
const TEXT = 'the quick brown fox jumps over the lazy dog while the cat watches it all from the fence';

const port = await freePort();
const server = await ensureRedis(`redis://127.0.0.1:${port}`);
if (!server.started) throw new Error(`port ${port} already had a Redis`);
const redis = new Redis({ port, host: '127.0.0.1' });
const monitorBase = new Redis({ port, host: '127.0.0.1' });
const monitor = await monitorBase.monitor();
const mock = await startMockLlm({ port: 0, chunkMs });
const env = {
  REDIS_URL: `redis://127.0.0.1:${port}`,
  CHATLANE_PREFIX: 'cost',
  LLM_BASE_URL: mock.url,
  LLM_MODEL: 'mock',
  REPLY_STREAM_TTL_MS: '3600000',
};
const ingress = await startRole('ingress', env);
const worker = await startRole('worker', env);

let calls = 0;
let requestBytes = 0;
let counting = false;
monitor.on('monitor', (_time: string, args: string[]) => {
  if (!counting || args[0]?.toLowerCase() !== 'evalsha' || args[1] !== scripts.replyWrite.sha) return;
  calls++;
  requestBytes += args.reduce((n, a) => n + Buffer.byteLength(a), 0);
});

let entries = 0;
let memory = 0;
let chunks = 0;
try {
  counting = true;
  for (let i = 0; i < turns; i++) {
    const chatKey = `cost-${i}`;
    const transport = new DefaultChatTransport({ api: `${ingress.url}/v1/ui` });
    const stream = await transport.sendMessages({
      chatId: chatKey,
      messages: [{ id: `m${i}`, role: 'user', parts: [{ type: 'text', text: TEXT }] }],
      trigger: 'submit-message',
      messageId: undefined,
      abortSignal: undefined,
    });
    for await (const _chunk of stream as ReadableStream<UIMessageChunk>) chunks++;
    const [key] = await redis.keys(`cost:{c:${chatKey}}:ui:*`);
    if (!key) throw new Error(`no reply stream for ${chatKey}`);
    entries += await redis.xlen(key);
    memory += Number(await redis.call('MEMORY', 'USAGE', key, 'SAMPLES', '0'));
    progress(`reply-stream-cost: ${i + 1}/${turns}`);
  }
  counting = false;
} finally {
  await worker.kill('SIGTERM');
  await ingress.kill('SIGTERM');
  await mock.close();
  monitor.disconnect();
  monitorBase.disconnect();
  redis.disconnect();
  await server.stop();
}

process.stdout.write(
  `${JSON.stringify(
    {
      turns,
      chunkMs,
      replyText: `echo: ${TEXT}`.length,
      perReply: {
        replyWriteCalls: calls / turns,
        replyWriteRequestBytes: Math.round(requestBytes / turns),
        streamEntries: entries / turns,
        streamMemoryBytes: Math.round(memory / turns),
        clientChunks: chunks / turns,
      },
    },
    null,
    2,
  )}\n`,
);

import { startMockLlm } from '../mock-llm/server.js';
import { loadConfig } from '../shared/config.js';
import { silentLogger } from '../shared/logger.js';
import type { ChatMessage } from '../shared/messages.js';
import { launch } from '../start/launch.js';
import { demoConfig, demoRedis, dropDemoKeys } from './env.js';
import { demoLoadtest } from './loadtest.js';
import { demoTelegram, demoTelegramRoundTrip } from './telegram.js';

/**
 * `chatlane demo`: the whole path on one machine — local Redis, the mock model, ingress and
 * a worker — with two people talking at once, one of them mid-turn.
 */

const CONVERSATION: Array<{ chatKey: string; id: string; text: string; user: string }> = [
  { chatKey: 'demo-alice', id: 'a1', text: 'Hi! Can you help me plan a trip?', user: 'alice' },
  { chatKey: 'demo-bob', id: 'b1', text: 'Hello there', user: 'bob' },
  { chatKey: 'demo-alice', id: 'a2', text: 'Somewhere warm in March.', user: 'alice' },
  { chatKey: 'demo-bob', id: 'b2', text: 'What is 2 + 2?', user: 'bob' },
  { chatKey: 'demo-alice', id: 'a2', text: 'Somewhere warm in March.', user: 'alice' }, // redelivered
  // The mock model loads a skill the user names: the demo loads examples/skills/weather.
  { chatKey: 'demo-bob', id: 'b3', text: 'skill: weather — what should I wear in Lisbon?', user: 'bob' },
];

function render(m: ChatMessage): string {
  return m.parts
    .map((p) => {
      if (p.type === 'text') return p.text;
      if (p.type === 'tool-chat_send' || p.type === 'tool-skills_load')
        return `[${p.type.slice(5)} ${JSON.stringify((p as { input?: unknown }).input)}]`;
      return p.type === 'step-start' ? '' : `[${p.type}]`;
    })
    .filter(Boolean)
    .join(' ');
}

export async function runDemo(): Promise<number> {
  const base = loadConfig();
  const redisServer = await demoRedis(base);
  const mock = await startMockLlm({ port: 0, latencyMs: [200, 400] });
  const telegram = await demoTelegram();
  const config = {
    ...demoConfig(base, mock.url),
    PLATFORMS: telegram.platforms,
  };
  // The roles `chatlane all` runs but the compactor, through the code startChatlane runs.
  const lane = await launch(config, { roles: ['worker', 'ingress'], logger: silentLogger(), tracing: false });
  const url = lane.url!;
  const where = config.REDIS_CLUSTER_NODES
    ? `Redis Cluster ${config.REDIS_CLUSTER_NODES.map((n) => `${n.host}:${n.port}`).join(',')}`
    : `Redis ${config.REDIS_URL}`;
  const api = `${url}/v1`;
  console.log(
    `chatlane demo — ${where}${redisServer.started ? ' (started for the demo)' : ''}, mock model ${mock.url}, ingress ${url}\n`,
  );

  try {
    for (const m of CONVERSATION) {
      const res = await fetch(`${api}/chats/${m.chatKey}/messages`, {
        method: 'POST',
        headers: { 'content-type': 'application/json' },
        body: JSON.stringify({ id: m.id, text: m.text, metadata: { userId: m.user, username: m.user } }),
      });
      console.log(`POST ${m.chatKey} "${m.text}" → ${res.status} ${JSON.stringify(await res.json())}`);
      await new Promise((r) => setTimeout(r, 150));
    }

    const chats = [...new Set(CONVERSATION.map((m) => m.chatKey))];
    const deadline = Date.now() + 30_000;
    for (;;) {
      const states = await Promise.all(
        chats.map(
          async (c) =>
            (await fetch(`${api}/chats/${c}/messages`)).json() as Promise<{
              pending: unknown[];
              messages: ChatMessage[];
            }>,
        ),
      );
      const settled = states.every((s) => s.pending.length === 0 && s.messages.at(-1)?.role === 'assistant');
      if (settled) break;
      if (Date.now() > deadline) throw new Error('the demo conversation did not settle within 30s');
      await new Promise((r) => setTimeout(r, 200));
    }

    for (const chatKey of chats) {
      const { messages } = (await (await fetch(`${api}/chats/${chatKey}/messages`)).json()) as {
        messages: ChatMessage[];
      };
      const { items } = (await (await fetch(`${api}/chats/${chatKey}/outbox`)).json()) as {
        items: Array<{ text: string }>;
      };
      console.log(`\n── ${chatKey}: history (${messages.length} messages)`);
      for (const m of messages) console.log(`  ${m.role.padEnd(9)} ${render(m)}`);
      console.log(`── ${chatKey}: outbox`);
      for (const o of items) console.log(`  → ${o.text}`);
    }
    console.log(
      `\nmodel requests: ${mock.state.requests}, most in flight for one chat: ${mock.state.maxInFlightPerChat}`,
    );
    await demoTelegramRoundTrip(url, telegram.fake);
    return await demoLoadtest(url, mock.url);
  } catch (err) {
    console.error(`demo failed: ${(err as Error).message}`);
    return 1;
  } finally {
    await lane.close();
    await mock.close();
    await telegram.fake.close();
    await dropDemoKeys(config);
    await redisServer.stop();
  }
}

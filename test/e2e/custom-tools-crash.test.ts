import { createServer, type Server } from 'node:http';
import { fileURLToPath } from 'node:url';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { ChatMessage } from '../../src/shared/messages.js';
import { OtlpReceiver } from '../helpers/otlp-receiver.js';
import { postMessage } from '../helpers/processes.js';
import { waitFor } from '../helpers/redis.js';
import { useStack } from '../helpers/stack.js';

/** A worker with tools given in code (the CLI takes none): see the fixture. */
const ENTRY = fileURLToPath(new URL('../fixtures/tools-worker.mjs', import.meta.url));
/** Short leases and locks: the takeover comes within a few seconds, not the default ~11 s. */
const FAST_RECOVERY = { TURN_LEASE_MS: '1500', JOB_LOCK_MS: '1500', STALLED_INTERVAL_MS: '500' };
/** Every model call of the doomed turns lasts this long: the kill lands inside the one after the tool. */
const CALL_MS = 4000;

/** The world outside the worker: counts each effect the tools cause, and survives the kill. */
async function effectServer(): Promise<{ url: string; counts: Map<string, number>; server: Server }> {
  const counts = new Map<string, number>();
  const server = createServer((req, res) => {
    const name = (req.url ?? '/').slice(1);
    const count = (counts.get(name) ?? 0) + 1;
    counts.set(name, count);
    res.writeHead(200, { 'content-type': 'application/json' }).end(JSON.stringify({ count }));
  });
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
  return { url: `http://127.0.0.1:${(server.address() as { port: number }).port}`, counts, server };
}

describe('a worker killed after a tool’s once fn ran, before the commit (real processes, tools given in code)', () => {
  const stack = useStack('e2e-tools', { roles: ['ingress'], env: FAST_RECOVERY });
  const { store, redis } = stack;
  const otlp = new OtlpReceiver();
  let effects: Awaited<ReturnType<typeof effectServer>>;

  beforeAll(async () => {
    effects = await effectServer();
    await otlp.start();
  });
  afterAll(async () => {
    effects?.server.close();
    await otlp.close();
  });

  it('kill -9 between fn and the commit: after the takeover fn ran once and the model saw its result; an unguarded effect ran twice', async () => {
    const ingress = stack.ingressUrl();
    const env = { TEST_EFFECT_URL: effects.url };
    const guarded = 'once-a';
    const unguarded = 'plain-a';
    const doomed = await stack.start('worker', env, { entry: ENTRY });
    for (const c of [guarded, unguarded]) stack.mock.state.setChatLatency(c, CALL_MS);
    await postMessage(ingress, guarded, `${guarded}-1`, 'please tool: refund {"order":"42"}');
    await postMessage(ingress, unguarded, `${unguarded}-1`, 'please tool: charge {"order":"42"}');

    // The second model call carries the tool's result: fn has run, its result is stored, and
    // the turn waits in the model, long before its commit.
    await Promise.all([guarded, unguarded].map((c) => stack.mock.state.waitForRequest(c, 2)));
    expect(effects.counts.get(`refund-${guarded}-42`)).toBe(1);
    expect(effects.counts.get(`charge-${unguarded}-42`)).toBe(1);
    const stored = JSON.parse((await redis.hget(store.keys(guarded).once, 'refund:42'))!);
    expect(stored).toMatchObject({ s: 'done', n: 1 });
    expect(await store.pendingCount(guarded)).toBe(1);
    await doomed.kill('SIGKILL');

    for (const c of [guarded, unguarded]) stack.mock.state.setChatLatency(c, undefined);
    const survivor = await stack.start(
      'worker',
      { ...env, OTEL_EXPORTER_OTLP_ENDPOINT: otlp.url, OTEL_EXPORTER_OTLP_PROTOCOL: 'http/json' },
      { entry: ENTRY },
    );
    await waitFor(
      async () => (await store.pendingCount(guarded)) === 0 && (await store.pendingCount(unguarded)) === 0,
      { timeoutMs: 30_000, intervalMs: 200, what: 'takeover after kill -9' },
    );

    // fn ran once; the control shows the takeover did run the tool again.
    expect(effects.counts.get(`refund-${guarded}-42`)).toBe(1);
    expect(effects.counts.get(`charge-${unguarded}-42`)).toBe(2);

    // The takeover's model read the stored result, and answered with it.
    const result = { refund: 'r-42', attempt: 1, effect: 1 };
    const last = stack.mock.state.recorded(guarded).at(-1)!;
    expect(JSON.stringify(last.messages)).toContain(JSON.stringify(JSON.stringify(result)).slice(1, -1));
    expect((await store.readOutbox(guarded, undefined, 10)).map((o) => o.text)).toEqual([
      `echo: please tool: refund {"order":"42"} (tool refund: ${JSON.stringify(result)})`,
    ]);
    const history: ChatMessage[] = await store.readHistory(guarded);
    expect(history.flatMap((m) => m.parts).find((p) => p.type === 'tool-refund')).toMatchObject({
      state: 'output-available',
      output: result,
    });

    const events = await store.readEvents(guarded, undefined, 100);
    expect(events.some((e) => e.type === 'lease.takeover')).toBe(true);
    expect(events.filter((e) => e.type === 'once.stored')).toHaveLength(1);
    expect(events.filter((e) => e.type === 'once.reused')).toHaveLength(1);
    const committed = events.filter((e) => e.type === 'turn.committed');
    expect(committed).toHaveLength(1);
    expect(String(committed[0]!.data.worker)).toMatch(new RegExp(`:${survivor.pid}$`));

    // The survivor's tool call is traced as the AI SDK traces every tool call.
    const span = await waitFor(
      async () => otlp.spans.find((s) => s.name === 'execute_tool refund' && s.service === 'chatlane-worker'),
      { timeoutMs: 30_000, what: 'the execute_tool span of the tool given in code' },
    );
    expect(span.attributes['gen_ai.tool.name']).toBe('refund');
    expect(stack.mock.state.violations).toEqual([]);
  }, 90_000);
});

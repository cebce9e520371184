import { mkdtempSync, readFileSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { describe, expect, it } from 'vitest';
import { OtlpReceiver } from '../helpers/otlp-receiver.js';
import { freePort } from '../helpers/ports.js';
import { startRole } from '../helpers/processes.js';
import { useStack } from '../helpers/stack.js';

const TRACE = fileURLToPath(new URL('../helpers/module-trace.mjs', import.meta.url));
const dir = mkdtempSync(join(tmpdir(), 'chatlane-modules-'));

/** Packages a worker must load only when its configuration asks for them. */
const CONDITIONAL = {
  chatSdk: /\/node_modules\/(chat|@chat-adapter\/[^/]+)\//,
  markdown: /\/node_modules\/(micromark|mdast-util-[^/]+|remark-[^/]+|unified)\//,
  mcp: /\/node_modules\/@ai-sdk\/mcp\//,
  standardWebhooks: /\/node_modules\/(standardwebhooks|@stablelib\/base64|fast-sha256)\//,
  fastify: /\/node_modules\/(fastify|@fastify\/[^/]+|@bull-board\/[^/]+)\//,
  /** The price file's parser (MODEL_PRICES_FILE). */
  yaml: /\/node_modules\/yaml\//,
};

/**
 * Never needed: BullMQ's PostgreSQL backend (its package index loads it), and what its classes
 * index loads besides Worker and Queue (flows, queue events, the relay, the Valkey GLIDE client).
 */
const POSTGRES = /\/node_modules\/bullmq\/dist\/cjs\/postgres\//;
const UNUSED_BULLMQ =
  /\/node_modules\/bullmq\/dist\/cjs\/classes\/(flow-producer|queue-events(-producer)?|relay|redis-relay-backend|valkey-glide-client)\.js$/;

/** Never needed: what prom-client's index loads besides the metric types chatlane uses. */
const UNUSED_PROM_CLIENT =
  /\/node_modules\/(tdigest\/|bintrees\/|prom-client\/lib\/(summary|pushgateway|cluster)\.js$)/;

/** Loaded only when a job scheduler uses a cron pattern (src/shared/cron-parser-on-demand.ts). */
const CRON = /\/node_modules\/(luxon|cron-parser\/dist\/CronExpressionParser\.js)/;

/**
 * The tracing SDK: loaded only when an OTLP endpoint is set (src/shared/tracing/start.ts).
 * @opentelemetry/api is not in it: BullMQ or the AI SDK may load that no-op facade anyway.
 */
const TRACING_SDK =
  /\/node_modules\/(@opentelemetry\/(?!api\/)[^/]+|@ai-sdk\/otel|import-in-the-middle|require-in-the-middle|bullmq-otel)\//;
const OTLP_PROTO_EXPORTER = /\/node_modules\/@opentelemetry\/exporter-trace-otlp-proto\//;
const OTLP_JSON_EXPORTER = /\/node_modules\/@opentelemetry\/exporter-trace-otlp-http\//;

const loaded = (modules: string[], pattern: RegExp) => modules.some((url) => pattern.test(url));

describe('what a worker process loads', () => {
  const stack = useStack('e2e-modules', { roles: [] });

  /** Starts a worker that records every module it resolves; returns them once it is up. */
  async function workerModules(label: string, env: Record<string, string> = {}): Promise<string[]> {
    const trace = join(dir, `${label}.txt`);
    writeFileSync(trace, '');
    const proc = await startRole(
      'worker',
      { ...stack.env, CHATLANE_MODULE_TRACE: trace, ...env },
      { nodeArgs: ['--import', TRACE] },
    );
    stack.procs.push(proc);
    await proc.kill('SIGTERM');
    return readFileSync(trace, 'utf8').split('\n').filter(Boolean);
  }

  it('without a chat platform, a signed webhook source, MCP_CONFIG or MODEL_PRICES_FILE: neither the Chat SDK, its Markdown stack, Standard Webhooks signing, @ai-sdk/mcp, a YAML parser, a web framework nor BullMQ’s PostgreSQL backend, unused classes and cron parser, nor prom-client’s unused metric types', async () => {
    const modules = await workerModules('plain');
    // The trace works: the modules every worker needs are in it.
    expect(loaded(modules, /\/node_modules\/ai\//)).toBe(true);
    expect(loaded(modules, /\/node_modules\/bullmq\/dist\/cjs\/classes\/worker\.js$/)).toBe(true);
    expect(loaded(modules, CONDITIONAL.chatSdk)).toBe(false);
    expect(loaded(modules, CONDITIONAL.markdown)).toBe(false);
    expect(loaded(modules, CONDITIONAL.mcp)).toBe(false);
    expect(loaded(modules, CONDITIONAL.yaml)).toBe(false);
    expect(loaded(modules, CONDITIONAL.standardWebhooks)).toBe(false);
    expect(loaded(modules, CONDITIONAL.fastify)).toBe(false);
    expect(loaded(modules, POSTGRES)).toBe(false);
    expect(loaded(modules, UNUSED_BULLMQ)).toBe(false);
    expect(loaded(modules, UNUSED_PROM_CLIENT)).toBe(false);
    expect(loaded(modules, CRON)).toBe(false);
    // Tracing off: no tracing SDK, so no exporter is ever created.
    expect(loaded(modules, TRACING_SDK)).toBe(false);
  });

  it('with OTEL_EXPORTER_OTLP_ENDPOINT set: the tracing SDK and the exporter of the chosen protocol only (http/protobuf by default, which the receiver gets), and still no web framework', async () => {
    const otlp = new OtlpReceiver();
    await otlp.start();
    const modules = await workerModules('traced', { OTEL_EXPORTER_OTLP_ENDPOINT: otlp.url }).finally(() =>
      otlp.close(),
    );
    // Its spans (the sweeper's job at start) were flushed at shutdown, as protobuf.
    expect(otlp.requests.length).toBeGreaterThan(0);
    expect(otlp.requests.every((r) => r.contentType === 'application/x-protobuf' && r.bytes > 0)).toBe(true);
    expect(loaded(modules, TRACING_SDK)).toBe(true);
    expect(loaded(modules, OTLP_PROTO_EXPORTER)).toBe(true);
    expect(loaded(modules, OTLP_JSON_EXPORTER)).toBe(false);
    // @fastify/otel is for the roles that serve HTTP.
    expect(loaded(modules, CONDITIONAL.fastify)).toBe(false);
  });

  it('with OTEL_SDK_DISABLED=true and an endpoint set: no tracing SDK module, so no exporter, and nothing reaches the receiver', async () => {
    const otlp = new OtlpReceiver();
    await otlp.start();
    const modules = await workerModules('disabled', {
      OTEL_EXPORTER_OTLP_ENDPOINT: otlp.url,
      OTEL_SDK_DISABLED: 'true',
    }).finally(() => otlp.close());
    expect(loaded(modules, /\/node_modules\/ai\//)).toBe(true);
    expect(loaded(modules, TRACING_SDK)).toBe(false);
    expect(otlp.requests).toHaveLength(0);
  });

  it('with Telegram, a signed webhook source, MCP_CONFIG and MODEL_PRICES_FILE set: the Chat SDK, Standard Webhooks signing, @ai-sdk/mcp and the YAML parser are loaded at start, before any job', async () => {
    const mcpConfig = join(dir, 'mcp.json');
    const prices = join(dir, 'prices.yaml');
    writeFileSync(prices, 'models:\n  mock:\n    input: 1\n    output: 2\n');
    // A server that is down does not stop the worker: the client is still built at start.
    const port = await freePort();
    writeFileSync(
      mcpConfig,
      JSON.stringify({ mcpServers: { remote: { url: `http://127.0.0.1:${port}/mcp` } } }),
    );
    const modules = await workerModules('configured', {
      TELEGRAM_BOT_TOKEN: '123456:test-token',
      TELEGRAM_WEBHOOK_SECRET_TOKEN: 'secret',
      GENERIC_WEBHOOK_SOURCES: 'crm',
      GENERIC_WEBHOOK_SECRETS_CRM: `whsec_${Buffer.alloc(32, 7).toString('base64')}`,
      MCP_CONFIG: mcpConfig,
      MCP_CONNECT_TIMEOUT_MS: '1000',
      MODEL_PRICES_FILE: prices,
    });
    expect(loaded(modules, CONDITIONAL.chatSdk)).toBe(true);
    expect(loaded(modules, CONDITIONAL.standardWebhooks)).toBe(true);
    expect(loaded(modules, CONDITIONAL.mcp)).toBe(true);
    expect(loaded(modules, CONDITIONAL.yaml)).toBe(true);
    expect(loaded(modules, CONDITIONAL.fastify)).toBe(false);
  });
});

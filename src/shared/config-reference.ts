import { z } from 'zod';
import { configSchema, mockLlmConfigSchema } from './config.js';
import { AREAS, START_HERE } from './config-areas.js';
import { PLATFORMS_GROUP, type PlatformVariableDoc, platformReference } from './config-platforms.js';

export { AREAS, START_HERE };

/**
 * The configuration reference: every variable of the config schema with its type, default,
 * allowed range, the roles that read it and its one-line meaning (the schema's `.describe`).
 * docs/configuration.md, `chatlane config` and `chatlane <role> --help` are all rendered from
 * it, and a test fails when the generated page differs from the schema, so neither can drift.
 * Loaded only by those commands: a running role never builds a second copy of the schema.
 */

export const ROLES = ['ingress', 'worker', 'compactor', 'delivery', 'mock-llm', 'loadtest'] as const;
export type Role = (typeof ROLES)[number];

/** What each role does, for `chatlane <role> --help`. `all` runs ingress, worker and compactor. */
export const ROLE_SUMMARY: Record<Role | 'all', string> = {
  ingress:
    'HTTP API and webhooks: stores each message in Redis and enqueues the turn of its chat; serves the live stream, /metrics, /healthz, /readyz and Bull Board.',
  worker:
    'Runs turns, one per chat at a time: reads the history, calls the model, records what it sends, commits. Also delivers replies when a platform or signed webhook is configured (unless DELIVERY_IN_WORKER=false), sweeps stranded chats and expires idle ones. Needs LLM_MODEL (provider:model, docs/models.md) and the key of its provider.',
  compactor:
    'Summarises the oldest part of long histories in the background so turns stay under MAX_INPUT_TOKENS. Needs COMPACTION_MODEL or LLM_MODEL (provider:model, docs/models.md) and the key of its provider.',
  delivery:
    'Sends outbox items to platforms and signed webhook receivers, in order, at least once; for fleets that keep delivery apart from the model workers (DELIVERY_IN_WORKER=false on those).',
  'mock-llm': 'The OpenAI-compatible mock model the tests, the demo and load tests use.',
  loadtest:
    'Drives a running deployment over HTTP and checks that nothing was lost (flags: chatlane loadtest --help).',
  all: 'Ingress, worker and compactor in one process, for development.',
};

const I = 'ingress';
const W = 'worker';
const C = 'compactor';
const D = 'delivery';
const every = [I, W, C, D] as const;

/**
 * Which roles read each variable. Every role parses the whole schema at boot (a bad value stops
 * any of them); this says whose behaviour a variable changes. A variable added to config.ts
 * needs a line here: the configuration reference test fails without one.
 */
export const VARIABLE_ROLES: Record<string, readonly Role[]> = {
  REDIS_URL: every,
  REDIS_CLUSTER_NODES: every,
  REDIS_SENTINELS: every,
  REDIS_SENTINEL_NAME: every,
  REDIS_SENTINEL_PASSWORD: every,
  // Ingest (ingress); the fence, replies and commit (worker, which also runs delivery triggers).
  REDIS_REPLICA_ACKS: [I, W],
  REDIS_REPLICA_ACKS_TIMEOUT_MS: [I, W],
  CHATLANE_PREFIX: every,
  HOST: every,
  PORT: [I],
  API_TOKEN: [I, 'loadtest'],
  ADMIN_USER: [I],
  ADMIN_PASSWORD: [I],
  ADMIN_READ_ONLY: [I],
  NODE_ENV: [I],
  API_AUTH: [I],
  METRICS_TOKEN: every,
  TRUST_PROXY: [I],
  AUTH_FAILURE_LIMIT: [I],
  AUTH_FAILURE_WINDOW_MS: [I],
  METRICS_PORT: [W, C, D],
  QUEUE_METRICS: every,
  LOG_LEVEL: every,
  OTEL_SDK_DISABLED: every,
  OTEL_EXPORTER_OTLP_ENDPOINT: every,
  OTEL_EXPORTER_OTLP_TRACES_ENDPOINT: every,
  OTEL_EXPORTER_OTLP_PROTOCOL: every,
  OTEL_EXPORTER_OTLP_TRACES_PROTOCOL: every,
  OTEL_EXPORTER_OTLP_HEADERS: every,
  OTEL_SERVICE_NAME: every,
  OTEL_RESOURCE_ATTRIBUTES: every,
  OTEL_TRACES_SAMPLER: every,
  OTEL_TRACES_SAMPLER_ARG: every,
  OTEL_PROPAGATORS: every,
  OTEL_BSP_SCHEDULE_DELAY: every,
  OTEL_BSP_EXPORT_TIMEOUT: every,
  OTEL_BSP_MAX_QUEUE_SIZE: every,
  OTEL_BSP_MAX_EXPORT_BATCH_SIZE: every,
  LLM_BASE_URL: [W, C],
  LLM_API_KEY: [W, C],
  LLM_MODEL: [W, C],
  LLM_TIMEOUT_MS: [W, C],
  LLM_FALLBACK_MODELS: [W, C],
  OPENAI_API_KEY: [W, C],
  OPENAI_BASE_URL: [W, C],
  ANTHROPIC_API_KEY: [W, C],
  ANTHROPIC_BASE_URL: [W, C],
  GOOGLE_GENERATIVE_AI_API_KEY: [W, C],
  GOOGLE_GENERATIVE_AI_BASE_URL: [W, C],
  WORKER_CONCURRENCY: [W],
  MAX_STEPS: [W],
  MAX_MERGES_PER_TURN: [W],
  // The ingress decides a message's debounce and tells a running turn to stop for it
  // (interrupt, with the cap); the worker watches for it.
  LANE_POLICY: [I, W],
  LANE_DEBOUNCE_MS: [I],
  LANE_DEBOUNCE_MAX_MS: [I],
  LANE_MAX_INTERRUPTS: [I],
  MAX_MESSAGES_PER_TURN: [W],
  MAX_PENDING_PER_CHAT: [I],
  MAX_INPUT_TOKENS: [W, C],
  HISTORY_KEEP_LAST_MESSAGES: [C],
  HISTORY_WINDOW_MESSAGES: [W],
  MAX_CHARS_PER_MESSAGE: [W, C],
  CHAT_SEND_MAX_PER_TURN: [W],
  SYSTEM_PROMPT_FILE: [W],
  MCP_CONFIG: [W],
  MCP_TOOL_TIMEOUT_MS: [W],
  MCP_RESULT_MAX_CHARS: [W],
  MCP_CONNECT_TIMEOUT_MS: [W],
  MCP_RECONNECT_MS: [W],
  TOOL_TIMEOUT_MS: [W],
  TOOL_RESULT_MAX_CHARS: [W],
  ONCE_RESULT_MAX_BYTES: [W],
  ONCE_MAX_KEYS: [W],
  ONCE_KEEP_MS: [W],
  SKILLS_DIR: [W],
  PROFILE_DIR: [W],
  MEMORY_MAX_TOKENS: [I, W],
  TURN_LEASE_MS: [W],
  JOB_LOCK_MS: [W, C, D],
  STALLED_INTERVAL_MS: [W, C, D],
  SWEEP_INTERVAL_MS: [W],
  SWEEP_BATCH: [W],
  SHUTDOWN_GRACE_MS: every,
  TURNS_GLOBAL_CONCURRENCY: [W],
  DEDUP_WINDOW_MS: [I],
  EVENTS_MAX_LEN: every,
  BODY_LIMIT_BYTES: [I],
  REDIS_COMMAND_TIMEOUT_MS: [I],
  HTTP_HEADERS_TIMEOUT_MS: [I],
  HTTP_REQUEST_TIMEOUT_MS: [I],
  HTTP_KEEP_ALIVE_TIMEOUT_MS: [I],
  HTTP_MAX_REQUESTS_PER_SOCKET: [I],
  COMPACT_AT_TOKENS: [W, C],
  KEEP_RECENT_TOKENS: [C],
  COMPACTION_MODEL: [W, C],
  COMPACTION_MAX_TOKENS: [C],
  COMPACTION_CONCURRENCY: [C],
  ARCHIVE_ON_COMPACT: [C],
  DELIVERY_IN_WORKER: [W],
  DELIVERY_CONCURRENCY: [W, D],
  DELIVERY_MAX_ATTEMPTS: [W, D],
  DELIVERY_BACKOFF_MS: [W, D],
  DELIVERY_BACKOFF_MAX_MS: [W, D],
  DELIVERY_TIMEOUT_MS: [W, D],
  PLATFORM_STREAMING: [W, D],
  GENERIC_WEBHOOK_SOURCES: [I, W, D],
  GENERIC_WEBHOOK_REPLY_HOSTS: [I, W, D],
  GENERIC_WEBHOOK_REPLY_ALLOW_HTTP: [I, W, D],
  SSE_HEARTBEAT_MS: [I],
  SSE_MAX_CLIENTS: [I],
  SSE_MAX_CLIENTS_PER_CHAT: [I],
  SSE_POLL_MS: [I],
  SSE_POLL_MAX_MS: [I],
  WEB_TOKEN_SECRET: [I],
  WEB_TOKEN_MAX_TTL_S: [I],
  WEB_TOKEN_AUDIENCE: [I],
  WEB_TOKEN_ISSUER: [I],
  WEB_ORIGINS: [I],
  REPLY_STREAMING: [W],
  REPLY_STREAM_MAX_LEN: [W],
  REPLY_STREAM_TTL_MS: [W],
  UI_WAIT_MS: [I],
  CONTACTS_RETENTION_DAYS: [I, W],
  CONTACT_SEND: [W],
  EXEC_SHELL: [W],
  EXEC_SHELL_TIMEOUT_MS: [W],
  EXEC_SHELL_OUTPUT_MAX_BYTES: [W],
  EXEC_SHELL_MAX_PROCESSES: [W],
  EXEC_SHELL_MEMORY_MAX_BYTES: [W],
  EXEC_SHELL_WORKSPACE_MAX_BYTES: [W],
  EXEC_SHELL_NETWORK: [W],
  EXEC_SHELL_READONLY_DIRS: [W],
  TOOL_APPROVAL: [W],
  TOOL_APPROVAL_TTL_MS: [W],
  TOOL_APPROVAL_ON_MESSAGE: [I, W],
  TOOL_APPROVAL_SECRET: [W],
  FILE_MEDIA_TYPES: [I],
  FILE_DATA_URL_MAX_BYTES: [I],
  FILE_FETCH_MAX_BYTES: [W],
  FILE_FETCH_TIMEOUT_MS: [W],
  FAILURE_NOTICE: [W],
  MODEL_RETRY_BACKOFF_MS: [W],
  MODEL_RETRY_BACKOFF_MAX_MS: [W],
  MODEL_PRICES_FILE: [I, W, C],
  CHAT_DAILY_TOKEN_BUDGET: [I, W],
  BUDGET_NOTICE: [W],
  ARCHIVE_MAX_ENTRIES: [I, W, C],
  ARCHIVE_MAX_BYTES: [I, W, C],
  CONTEXTS_MAX: [I, W, C],
  OUTBOX_KEEP_ITEMS: [I, W, C],
  CHAT_TTL_DAYS: [W],
  CHAT_EXPIRY_INTERVAL_MS: [W],
  USAGE_KEEP_DAYS: [W, C],
  GROUP_MODE: [I],
  POLLER_LEASE_MS: [I],
  MOCK_LLM_HOST: ['mock-llm'],
  MOCK_LLM_PORT: ['mock-llm'],
  MOCK_LLM_LATENCY_MS: ['mock-llm'],
  MOCK_LLM_CHUNK_MS: ['mock-llm'],
};

export interface VariableDoc {
  name: string;
  /** integer, string, URL, flag, one of …, list, … */
  type: string;
  /** As the variable would be written; undefined when unset by default. */
  default: string | undefined;
  /** Allowed values beyond the type (bounds, pattern, length); undefined when any. */
  range: string | undefined;
  roles: readonly Role[];
  /** The schema's `.describe`; undefined when missing (a test fails on it). */
  description: string | undefined;
}

interface JsonProp {
  type?: string;
  default?: unknown;
  enum?: unknown[];
  minimum?: number;
  maximum?: number;
  maxLength?: number;
  minLength?: number;
  pattern?: string;
  format?: string;
  description?: string;
}

/** Lists, flags and the like are strings with a transform: their type says what to write. */
const LIST_TYPES: Record<string, string> = {
  REDIS_CLUSTER_NODES: 'list of host:port',
  REDIS_SENTINELS: 'list of host:port',
  GENERIC_WEBHOOK_SOURCES: 'list of names',
  GENERIC_WEBHOOK_REPLY_HOSTS: 'list of hosts',
  FILE_MEDIA_TYPES: 'list of media types',
  EXEC_SHELL_NETWORK: 'list of hosts',
  EXEC_SHELL_READONLY_DIRS: 'list of paths',
  MOCK_LLM_LATENCY_MS: 'n or min-max',
  OTEL_PROPAGATORS: 'list of propagators',
  TRUST_PROXY: 'true, hop count or list of addresses',
};

/** One schema's properties as JSON Schema: its input (bounds, defaults) and output (pipes' bounds). */
function properties(schema: z.ZodObject): Record<string, { in: JsonProp; out: JsonProp }> {
  const read = (io: 'input' | 'output') =>
    (z.toJSONSchema(schema, { io, unrepresentable: 'any' }) as { properties: Record<string, JsonProp> })
      .properties;
  const input = read('input');
  const output = read('output');
  return Object.fromEntries(
    Object.keys(schema.shape).map((k) => [k, { in: input[k]!, out: output[k] ?? {} }]),
  );
}

function describeVariable(
  name: string,
  p: { in: JsonProp; out: JsonProp },
  description?: string,
): VariableDoc {
  const { in: input, out } = p;
  const values = input.enum?.map(String);
  const isFlag =
    values !== undefined &&
    values.length === 4 &&
    ['true', 'false', '1', '0'].every((v) => values.includes(v));
  let type: string;
  if (isFlag) type = 'flag';
  else if (values) type = `one of ${values.join(', ')}`;
  else if (LIST_TYPES[name]) type = LIST_TYPES[name];
  else if (input.type === 'integer' || input.type === 'number') type = input.type;
  else if (out.format === 'uri' || input.format === 'uri') type = 'URL';
  else type = 'string';

  const bounds: string[] = [];
  const min = Math.max(input.minimum ?? -Infinity, out.minimum ?? -Infinity);
  const max = Math.min(input.maximum ?? Infinity, out.maximum ?? Infinity);
  if (Number.isFinite(min) && Number.isFinite(max) && max < Number.MAX_SAFE_INTEGER)
    bounds.push(`${min}–${max}`);
  else if (Number.isFinite(min)) bounds.push(`≥ ${min}`);
  else if (Number.isFinite(max) && max < Number.MAX_SAFE_INTEGER) bounds.push(`≤ ${max}`);
  const minLength = input.minLength ?? out.minLength;
  if (minLength !== undefined) bounds.push(`at least ${minLength} characters`);
  const maxLength = input.maxLength ?? out.maxLength;
  if (maxLength !== undefined) bounds.push(`at most ${maxLength} characters`);
  const pattern = input.pattern ?? out.pattern;
  if (pattern !== undefined) bounds.push(`matches \`${pattern}\``);
  if (isFlag) bounds.push('true, false, 1 or 0');

  return {
    name,
    type,
    default: input.default === undefined ? undefined : String(input.default),
    range: bounds.length > 0 ? bounds.join(', ') : undefined,
    roles: VARIABLE_ROLES[name] ?? [],
    description: description ?? input.description,
  };
}

/** Every variable of the config schema and the mock model's, in schema order. */
export function configReference(): VariableDoc[] {
  const docs: VariableDoc[] = [];
  for (const schema of [configSchema(), mockLlmConfigSchema()]) {
    const props = properties(schema);
    for (const [name, field] of Object.entries(schema.shape)) {
      docs.push(describeVariable(name, props[name]!, (field as z.ZodType).description));
    }
  }
  return docs;
}

/** A default as a person reads it: 600000 ms also as 10 min, 131072 bytes also as 128 KiB. */
export function readableDefault(name: string, value: string | undefined): string {
  if (value === undefined) return '—';
  const n = Number(value);
  if (value === '' || !Number.isFinite(n) || n === 0) return value === '' ? '""' : value;
  if (name.endsWith('_MS') && n >= 60_000) {
    const units: [number, string][] = [
      [86_400_000, 'd'],
      [3_600_000, 'h'],
      [60_000, 'min'],
    ];
    const [size, unit] = units.find(([s]) => n % s === 0) ?? [1000, 's'];
    return `${value} (${n / size} ${unit})`;
  }
  if (name.endsWith('_BYTES') && n >= 1024 && n % 1024 === 0) {
    return n % (1024 * 1024) === 0 ? `${value} (${n / 1024 / 1024} MiB)` : `${value} (${n / 1024} KiB)`;
  }
  return value;
}

const cell = (s: string) => s.replaceAll('|', '\\|');

/** A group of the reference: Start here, or one of the AREAS. */
export interface VariableGroup {
  title: string;
  docs: VariableDoc[];
}

/**
 * `docs` in the reference's groups: Start here first, then each area in order, each variable
 * once; empty groups are left out. A variable in no area (the test forbids it) goes to Other.
 */
export function groupByArea(docs: VariableDoc[]): VariableGroup[] {
  const byName = new Map(docs.map((d) => [d.name, d]));
  const placed = new Set<string>();
  const take = (names: readonly string[]) =>
    names.flatMap((name) => {
      const doc = byName.get(name);
      if (!doc || placed.has(name)) return [];
      placed.add(name);
      return [doc];
    });
  const groups = [START_HERE, ...AREAS].map((area) => ({ title: area.title, docs: take(area.variables) }));
  groups.push({ title: 'Other', docs: docs.filter((d) => !placed.has(d.name)) });
  return groups.filter((g) => g.docs.length > 0);
}

/** docs/configuration.md, whole. */
export function configurationMarkdown(
  docs: VariableDoc[] = configReference(),
  platforms: PlatformVariableDoc[] = platformReference(),
): string {
  const row = (d: VariableDoc) =>
    `| \`${d.name}\` | ${cell(d.type)} | ${d.default === undefined ? '—' : `\`${cell(readableDefault(d.name, d.default))}\``} | ${cell(d.range ?? '')} | ${d.roles.join(', ')} | ${cell(d.description ?? '')} |`;
  const sections = groupByArea(docs).map(
    (g) => `## ${g.title}

| variable | type | default | allowed | roles | meaning |
|---|---|---|---|---|---|
${g.docs.map(row).join('\n')}
`,
  );
  if (platforms.length > 0) sections.push(platformsMarkdown(platforms));
  return `# Configuration

<!-- Generated from src/shared/config.ts by \`npm run docs:config\`; do not edit by hand. -->

chatlane reads its configuration from the environment only, parsed once at boot by one zod
schema (src/shared/config.ts); a bad value stops the process with a message naming the
variable, before it binds a port or takes a job. An empty variable counts as unset. Every
role parses every variable of the main schema (the mock model only its own \`MOCK_LLM_*\`);
**roles** says whose behaviour a variable changes (\`all\` runs ingress, worker and compactor in
one process and reads what they read).

The variables are grouped by area. *Start here* comes first: the model and its provider's
key, Redis, the ports and who may call, what a first deployment sets; each of them is listed
there only, not again under its area.

\`chatlane config\` prints this reference, \`chatlane config --role worker\` one role's part of
it, and \`chatlane <role> --help\` says what a role does and which variables it reads, in the
same groups. This page is generated from the schema (\`npm run docs:config\`); a test fails
when it differs from what the schema generates, when a variable has no one-line meaning, and
when a variable is in no area.

The chat platforms' variables (\`TELEGRAM_BOT_TOKEN\`, \`SLACK_SIGNING_SECRET\`, …) are not in
the schema: each platform module reads its own, and they are listed last, under
[Chat platforms](#chat-platforms), from the modules themselves.

Not in these tables, because they are named by other variables or are flags:

- \`GENERIC_WEBHOOK_SECRETS_<NAME>\`: for each source in \`GENERIC_WEBHOOK_SOURCES\` (name
  upper-cased, \`-\` becomes \`_\`), its Standard Webhooks secrets, \`whsec_\` + base64 of 24–64
  bytes, separated by spaces or commas, newest first ([webhooks-and-delivery.md](webhooks-and-delivery.md)).
- \`<CHANNEL>_LANE_POLICY\`, \`<CHANNEL>_LANE_DEBOUNCE_MS\`, \`<CHANNEL>_LANE_DEBOUNCE_MAX_MS\`,
  \`<CHANNEL>_LANE_MAX_INTERRUPTS\`: the \`LANE_*\` settings of one channel (\`TELEGRAM\`, \`SLACK\`, …,
  \`WEB\`, \`API\`, \`GENERIC\`, and \`GENERIC_<NAME>\` for a generic source), read by the ingress and workers
  ([lane-policies.md](lane-policies.md#per-channel-settings)).
- \`chatlane loadtest\` reads \`API_TOKEN\` and \`LOADTEST_WEBHOOK_SECRET\` and takes the rest as
  flags (\`chatlane loadtest --help\`, [load-testing.md](load-testing.md)).

${sections.join('\n')}`;
}

/** The Chat platforms section of docs/configuration.md. */
function platformsMarkdown(vars: PlatformVariableDoc[]): string {
  const rows = vars.map(
    (v) =>
      `| \`${v.name}\` | ${v.platform} | ${v.required === true ? 'yes' : cell(v.required ?? '')} | ${v.default === undefined ? '—' : cell(v.default)} | ${cell(v.meaning)} |`,
  );
  return `## ${PLATFORMS_GROUP.title}

${PLATFORMS_GROUP.intro.replace('docs/platforms.md', '[platforms.md](platforms.md)')}

| variable | platform | required | default | meaning |
|---|---|---|---|---|
${rows.join('\n')}
`;
}

/** Which variables a role reads; `all` is the ingress's, worker's and compactor's together. */
export function variablesOf(role: Role | 'all', docs: VariableDoc[] = configReference()): VariableDoc[] {
  const wanted: readonly Role[] = role === 'all' ? [I, W, C] : [role];
  return docs.filter((d) => d.roles.some((r) => wanted.includes(r)));
}

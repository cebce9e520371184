import { z } from 'zod';
import { DEFAULT_FILE_MEDIA_TYPES, type FilePolicy } from './file-parts.js';
import type { EnabledPlatform } from './platforms/platform.js';
import { platformsFromEnv } from './platforms/registry.js';
import { retentionShape } from './retention.js';

/**
 * The one place that reads the environment. Parsed once at boot; a bad value stops the
 * process with a message naming the variable (see `ConfigError`).
 */

const int = (def: number, min = 0) => z.coerce.number().int().min(min).default(def);
const optionalString = z
  .string()
  .optional()
  .transform((v) => (v === undefined || v.trim() === '' ? undefined : v));

export interface ClusterNode {
  host: string;
  port: number;
}

/** `host:port,host:port` (IPv6 as `[::1]:7000`): startup nodes of a Redis Cluster. */
const clusterNodes = z
  .string()
  .optional()
  .transform((v, ctx): ClusterNode[] | undefined => {
    if (v === undefined || v.trim() === '') return undefined;
    const nodes: ClusterNode[] = [];
    for (const item of v.split(',').map((s) => s.trim())) {
      const m = /^(?:\[([^\]]+)\]|([^:\s]+)):(\d{1,5})$/.exec(item);
      const port = Number(m?.[3]);
      if (!m || port < 1 || port > 65535) {
        ctx.addIssue({ code: 'custom', message: `'${item}' is not host:port (comma-separated list)` });
        return z.NEVER;
      }
      nodes.push({ host: (m[1] ?? m[2])!, port });
    }
    return nodes;
  });

/** A flag variable: true/false/1/0. */
const flag = (def: 'true' | 'false') =>
  z
    .enum(['true', 'false', '1', '0'])
    .default(def)
    .transform((v) => v === 'true' || v === '1');

/** Comma-separated names matching `pattern`, without repeats; unset = none. */
const nameList = (pattern: RegExp, what: string) =>
  z
    .string()
    .optional()
    .transform((v, ctx): string[] => {
      const names = (v ?? '')
        .split(',')
        .map((s) => s.trim())
        .filter(Boolean);
      for (const name of names) {
        if (!pattern.test(name)) ctx.addIssue({ code: 'custom', message: `'${name}' is not ${what}` });
      }
      if (new Set(names).size !== names.length)
        ctx.addIssue({ code: 'custom', message: 'lists a name twice' });
      return names;
    });

/**
 * The environment's schema, built for the one parse at boot and then dropped: held in a
 * module constant, its zod objects (each carrying its own methods) would stay on every
 * process's heap for good (see docs/BENCHMARKS.md §7b).
 */
const configSchema = () =>
  z.object({
    REDIS_URL: z.string().url().default('redis://127.0.0.1:6379'),
    // When set, every connection is an ioredis Cluster over these nodes (REDIS_URL then only
    // lends its username, password and rediss: TLS to every node).
    REDIS_CLUSTER_NODES: clusterNodes,
    // Braces would let a prefix steal the hash tag of every key; colons are our separator.
    CHATLANE_PREFIX: z
      .string()
      .regex(/^[A-Za-z0-9._-]{1,64}$/, 'must be 1-64 chars of [A-Za-z0-9._-]')
      .default('chatlane'),
    HOST: z.string().min(1).default('0.0.0.0'),
    PORT: int(3000).pipe(z.number().max(65535)),
    API_TOKEN: optionalString,
    // Bull Board at /admin/queues: mounted only when both are set (basic auth).
    ADMIN_USER: optionalString,
    ADMIN_PASSWORD: optionalString,
    ADMIN_READ_ONLY: flag('false'),
    // Worker / compactor side port for /metrics, /healthz, /readyz. Unset: DEFAULT_METRICS_PORT
    // if it is free, else any free port (so several processes share a host with no setup).
    // Set: exactly that port (0 = any free port); a taken one stops the process.
    METRICS_PORT: z.coerce.number().int().min(0).max(65535).optional(),
    // Queue-wide metrics (BullMQ job counts by state, completed/failed totals) describe the whole
    // fleet, so exactly one process should export them or sums over processes over-count.
    // Unset: the ingress does, workers and compactors do not. true/false overrides per process.
    QUEUE_METRICS: z
      .enum(['true', 'false', '1', '0'])
      .optional()
      .transform((v) => (v === undefined ? undefined : v === 'true' || v === '1')),
    LOG_LEVEL: z.enum(['fatal', 'error', 'warn', 'info', 'debug', 'trace', 'silent']).default('info'),

    LLM_BASE_URL: optionalString.pipe(z.string().url().optional()),
    LLM_API_KEY: optionalString,
    LLM_MODEL: optionalString,
    LLM_TIMEOUT_MS: int(120_000, 1000),

    WORKER_CONCURRENCY: int(32, 1),
    MAX_STEPS: int(16, 1),
    MAX_MERGES_PER_TURN: int(8, 0),
    MAX_MESSAGES_PER_TURN: int(20, 1),
    MAX_PENDING_PER_CHAT: int(1000, 1),
    MAX_INPUT_TOKENS: int(12_000, 256),
    HISTORY_KEEP_LAST_MESSAGES: int(30, 1),
    HISTORY_WINDOW_MESSAGES: int(200, 1),
    MAX_CHARS_PER_MESSAGE: int(4000, 100),
    CHAT_SEND_MAX_PER_TURN: int(5, 1),
    SYSTEM_PROMPT_FILE: optionalString,

    // Agent capabilities (README, "Giving the agent capabilities"). MCP_CONFIG: a JSON file in
    // the Claude Desktop `mcpServers` format; checked at start, a bad file stops the worker.
    MCP_CONFIG: optionalString,
    MCP_TOOL_TIMEOUT_MS: int(30_000, 100),
    // A tool result longer than this (as JSON) reaches the model and the history truncated.
    MCP_RESULT_MAX_CHARS: int(20_000, 200),
    MCP_CONNECT_TIMEOUT_MS: int(10_000, 100),
    MCP_RECONNECT_MS: int(10_000, 100),
    // A directory of skills (<skill>/SKILL.md with name and description front matter).
    SKILLS_DIR: optionalString,
    // Primary.md and other.md from here go into the system prompt right after its first line.
    PROFILE_DIR: optionalString,
    // The per-chat memory document (chat_memory_update, /v1/chats/:chatKey/memory) is capped at this.
    MEMORY_MAX_TOKENS: int(1000, 1),

    // Liveness (docs/DESIGN.md, "Recovery"): lease and job lock are renewed ~10× per period, so
    // a worker stalled up to ~7 s keeps its turns while a dead one's chats are taken over
    // within about JOB_LOCK_MS + STALLED_INTERVAL_MS.
    TURN_LEASE_MS: int(10_000, 100),
    JOB_LOCK_MS: int(10_000, 100),
    STALLED_INTERVAL_MS: int(1_000, 100),
    // Sweeper (DESIGN §5): re-enqueues chats with pending messages, no live job and no live lease.
    SWEEP_INTERVAL_MS: int(30_000, 100),
    SWEEP_BATCH: int(1000, 1),
    // Graceful shutdown: running turns get this long to finish. Keep it below the orchestrator's
    // kill deadline (docker-compose stop_grace_period: 40s for workers).
    SHUTDOWN_GRACE_MS: int(25_000, 0),
    // Turns running at once across the whole fleet (BullMQ global concurrency on `turns`):
    // unset leaves the value stored in Redis alone, 0 removes the cap.
    TURNS_GLOBAL_CONCURRENCY: z.coerce.number().int().min(0).optional(),
    DEDUP_WINDOW_MS: int(7 * 24 * 3600 * 1000, 1000),
    // Per-chat event stream (~290 B an event), trimmed approximately (Redis MAXLEN ~).
    EVENTS_MAX_LEN: int(300, 10),
    BODY_LIMIT_BYTES: int(256 * 1024, 1024),
    // Ingress: a Redis command not answered within this fails the request with 503 (a hung
    // Redis must not hang every request). Workers wait instead: see src/shared/redis.ts.
    REDIS_COMMAND_TIMEOUT_MS: int(1000, 0),
    // Slow clients (ingress): the request line and headers must arrive within the first, the whole
    // request (body included) within the second, or the client gets 408 and the connection is
    // closed. An idle keep-alive connection is closed after the third: keep it above the idle
    // timeout of the load balancer in front (AWS ALB: 60 s), so the balancer closes first.
    HTTP_HEADERS_TIMEOUT_MS: int(10_000, 1),
    HTTP_REQUEST_TIMEOUT_MS: int(30_000, 1),
    HTTP_KEEP_ALIVE_TIMEOUT_MS: int(65_000, 1),
    // Requests one connection may carry before the server closes it (0 = no limit).
    HTTP_MAX_REQUESTS_PER_SOCKET: int(0, 0),

    // Compaction (DESIGN §7). Token thresholds default to fractions of MAX_INPUT_TOKENS.
    COMPACT_AT_TOKENS: z.coerce.number().int().min(1).optional(),
    KEEP_RECENT_TOKENS: z.coerce.number().int().min(0).optional(),
    COMPACTION_MODEL: optionalString,
    COMPACTION_MAX_TOKENS: int(1500, 64),
    COMPACTION_CONCURRENCY: int(4, 1),
    ARCHIVE_ON_COMPACT: flag('true'),

    // Delivery of outbox items to chats with a reply route (platforms, generic webhooks).
    // The worker process runs the delivery worker too unless this is false (then run
    // `chatlane delivery` processes).
    DELIVERY_IN_WORKER: flag('true'),
    DELIVERY_CONCURRENCY: int(64, 1),
    // Attempts per outbox item (every non-ok answer counts, rate limits included); then the
    // item is skipped and recorded as `delivery.failed`.
    DELIVERY_MAX_ATTEMPTS: int(10, 1),
    DELIVERY_BACKOFF_MS: int(1000, 10),
    DELIVERY_BACKOFF_MAX_MS: int(60_000, 10),
    // One send's limit; a chat's delivery lease is derived from it (see src/worker/delivery).
    DELIVERY_TIMEOUT_MS: int(10_000, 100),

    // Signed generic webhooks (POST /webhooks/generic/:source). Each source listed here needs
    // GENERIC_WEBHOOK_SECRETS_<NAME> (see `genericSources`).
    GENERIC_WEBHOOK_SOURCES: nameList(
      /^[a-z0-9][a-z0-9_-]{0,63}$/,
      'a source name (1-64 chars of [a-z0-9_-])',
    ),
    // Where replies may be POSTed (replyTo.url). Unset: any host whose addresses are all
    // public. Set: only these hosts (exact, or `*.example.com` for subdomains), which may then
    // also be private addresses (internal services the operator vouches for).
    GENERIC_WEBHOOK_REPLY_HOSTS: nameList(
      /^(\*\.)?[a-z0-9]([a-z0-9.-]{0,251}[a-z0-9])?$|^\[[0-9a-f:.]+\]$/,
      'a host name, *.domain, an IPv4 address or a [bracketed] IPv6 address (lowercase)',
    ),
    // http: reply URLs (development against a local receiver); https only otherwise.
    GENERIC_WEBHOOK_REPLY_ALLOW_HTTP: flag('false'),

    // Live stream (GET /v1/chats/:chatKey/stream): heartbeat comment interval, streams per
    // ingress process, and on a Redis Cluster the interval between reads of a chat with news,
    // backing off to SSE_POLL_MAX_MS while it is quiet (a single Redis is read with one
    // blocking XREAD instead).
    SSE_HEARTBEAT_MS: int(15_000, 100),
    SSE_MAX_CLIENTS: int(10_000, 1),
    SSE_POLL_MS: int(250, 10),
    SSE_POLL_MAX_MS: int(1000, 10),

    WEB_TOKEN_SECRET: optionalString
      .refine((v) => v === undefined || v.length >= 32, 'must be at least 32 characters')
      .describe(
        "HS256 secret of per-chat browser tokens (JWT, sub = chatKey, exp required) that open /v1/ui* and one chat's live stream; unset: no browser tokens",
      ),
    WEB_ORIGINS: nameList(/^https?:\/\/[^\s,/]+$/, 'an origin (scheme://host[:port])').describe(
      'Comma-separated browser origins allowed by CORS (e.g. https://app.example.com); unset: no cross-origin access',
    ),
    REPLY_STREAM_MAX_LEN: int(5000, 10).describe(
      'Most UI message chunks kept in one reply stream (XADD MAXLEN ~); a longer reply keeps its newest chunks',
    ),
    REPLY_STREAM_TTL_MS: int(300_000, 1000).describe(
      'How long a reply stream (the live view of a reply for /v1/ui) lives after its last write',
    ),
    UI_WAIT_MS: int(600_000, 1000).describe(
      'Longest POST /v1/ui waits for the turn that answers its message before it ends the response',
    ),

    // Contact book: entries not seen for this long are dropped. chat_contact_send (the model
    // writing to another chat found in it) only with CONTACT_SEND=on.
    CONTACTS_RETENTION_DAYS: int(90, 1),
    CONTACT_SEND: z.enum(['on', 'off']).default('off'),

    // File parts (README "File parts"): at ingest only https: URLs and data: URLs up to
    // FILE_DATA_URL_MAX_BYTES (decoded) with a media type from FILE_MEDIA_TYPES (exact types or
    // `family/*`); the worker fetches https: files itself, after DNS, refusing private addresses,
    // at most FILE_FETCH_MAX_BYTES within FILE_FETCH_TIMEOUT_MS.
    FILE_MEDIA_TYPES: z
      .string()
      .optional()
      .transform((v, ctx): string[] => {
        if (v === undefined) return [...DEFAULT_FILE_MEDIA_TYPES];
        const types = v
          .split(',')
          .map((s) => s.trim().toLowerCase())
          .filter(Boolean);
        for (const t of types) {
          if (!/^[a-z0-9][a-z0-9!#$&^_.+-]*\/(\*|[a-z0-9][a-z0-9!#$&^_.+-]*)$/.test(t))
            ctx.addIssue({ code: 'custom', message: `'${t}' is not a media type (type/subtype or type/*)` });
        }
        return types;
      }),
    FILE_DATA_URL_MAX_BYTES: int(128 * 1024, 0),
    FILE_FETCH_MAX_BYTES: int(10 * 1024 * 1024, 1),
    FILE_FETCH_TIMEOUT_MS: int(10_000, 100),

    // When a message itself cannot be processed (README "When a message fails") the chat gets
    // this one notice and the message is kept in history marked failed.
    FAILURE_NOTICE: z
      .string()
      .max(2000)
      .default("Sorry — I couldn't process your last message. Please send it again."),
    // Model unreachable or refusing our credentials: the chat's turn waits this long, doubling
    // per consecutive failure of this worker's model calls up to the max, then tries again.
    MODEL_RETRY_BACKOFF_MS: int(2000, 10),
    MODEL_RETRY_BACKOFF_MAX_MS: int(60_000, 10),
    ...retentionShape(),
    // Chat platforms (src/shared/platforms): each reads its own variables (TELEGRAM_BOT_TOKEN,
    // ...) through its module; a half-configured one stops the process. In group chats,
    // ingest every message (all) or only those that mention the bot (mentions).
    GROUP_MODE: z.enum(['all', 'mentions']).default('mentions'),
    // How long one poller holds a platform's fleet-wide polling lease without renewing it.
    POLLER_LEASE_MS: int(15_000, 1000),
  });

type RawConfig = z.infer<ReturnType<typeof configSchema>>;
export type Config = Omit<RawConfig, 'COMPACT_AT_TOKENS' | 'KEEP_RECENT_TOKENS'> & {
  COMPACT_AT_TOKENS: number;
  KEEP_RECENT_TOKENS: number;
  /** GENERIC_WEBHOOK_SOURCES with their secrets. */
  GENERIC_WEBHOOKS: GenericSource[];
  /** Chat platforms the environment turns on (src/shared/platforms/registry.ts). */
  PLATFORMS: EnabledPlatform[];
};

/** A generic webhook source: its name and its Standard Webhooks secrets, current first. */
export interface GenericSource {
  name: string;
  secrets: string[];
}

/** The variable holding a source's secrets: GENERIC_WEBHOOK_SECRETS_<NAME> ('-' becomes '_'). */
export function genericSecretsVariable(source: string): string {
  return `GENERIC_WEBHOOK_SECRETS_${source.toUpperCase().replace(/-/g, '_')}`;
}

const WHSEC = /^(?:whsec_)?([A-Za-z0-9+/]+={0,2})$/;

/**
 * Each source's secrets: whitespace- or comma-separated Standard Webhooks secrets
 * (`whsec_` + base64 of 24-64 bytes). Several at once for rotation: every one verifies
 * incoming webhooks and signs replies (one signature each); put the newest first.
 */
function genericSources(
  names: string[],
  env: Record<string, string>,
): { sources: GenericSource[]; issues: string[] } {
  const sources: GenericSource[] = [];
  const issues: string[] = [];
  const seen = new Map<string, string>();
  for (const name of names) {
    const variable = genericSecretsVariable(name);
    const other = seen.get(variable);
    if (other) {
      issues.push(`  GENERIC_WEBHOOK_SOURCES: '${other}' and '${name}' both read ${variable}`);
      continue;
    }
    seen.set(variable, name);
    const secrets = (env[variable] ?? '').split(/[\s,]+/).filter(Boolean);
    if (secrets.length === 0) {
      issues.push(`  ${variable}: missing: source '${name}' needs at least one signing secret`);
      continue;
    }
    secrets.forEach((secret, i) => {
      const m = WHSEC.exec(secret);
      const bytes = m ? Buffer.from(m[1]!, 'base64').length : 0;
      if (bytes < 24 || bytes > 64) {
        issues.push(
          `  ${variable}: secret ${i + 1} is not whsec_ followed by the base64 of 24-64 random bytes`,
        );
      }
    });
    sources.push({ name, secrets });
  }
  return { sources, issues };
}

/** Values that default to a share of another one. */
function derive(raw: RawConfig, sources: GenericSource[], platforms: EnabledPlatform[]): Config {
  return {
    ...raw,
    GENERIC_WEBHOOKS: sources,
    PLATFORMS: platforms,
    COMPACT_AT_TOKENS: raw.COMPACT_AT_TOKENS ?? Math.floor(0.8 * raw.MAX_INPUT_TOKENS),
    KEEP_RECENT_TOKENS: raw.KEEP_RECENT_TOKENS ?? Math.floor(0.4 * raw.MAX_INPUT_TOKENS),
  };
}

/** The ingest rule for file parts, from FILE_MEDIA_TYPES and FILE_DATA_URL_MAX_BYTES. */
export function filePolicy(config: Pick<Config, 'FILE_MEDIA_TYPES' | 'FILE_DATA_URL_MAX_BYTES'>): FilePolicy {
  return { mediaTypes: config.FILE_MEDIA_TYPES, maxDataBytes: config.FILE_DATA_URL_MAX_BYTES };
}

/** The side port a worker or compactor tries first when METRICS_PORT is unset. */
export const DEFAULT_METRICS_PORT = 9100;

export class ConfigError extends Error {
  override name = 'ConfigError';
}

/** An empty variable means unset (compose's `${VAR:-}` passes empty strings). */
function withoutBlanks(env: NodeJS.ProcessEnv): Record<string, string> {
  const out: Record<string, string> = {};
  for (const [k, v] of Object.entries(env)) if (v !== undefined && v.trim() !== '') out[k] = v;
  return out;
}

export function loadConfig(env: NodeJS.ProcessEnv = process.env): Config {
  const vars = withoutBlanks(env);
  // jitless: zod compiles an object's parser on its first parse, which pays back only for a
  // schema parsed again and again; this one is parsed once (its compiled source was 52 KB).
  const parsed = configSchema().safeParse(vars, { jitless: true });
  const lines = parsed.success
    ? []
    : parsed.error.issues.map((i) => `  ${i.path.join('.') || '(env)'}: ${i.message}`);
  const generic = genericSources(parsed.success ? parsed.data.GENERIC_WEBHOOK_SOURCES : [], vars);
  lines.push(...generic.issues);
  const platforms = platformsFromEnv(vars);
  lines.push(...platforms.problems);
  if (!parsed.success || lines.length > 0) {
    throw new ConfigError(`invalid configuration:\n${lines.join('\n')}`);
  }
  const config = derive(parsed.data, generic.sources, platforms.platforms);
  // Node refuses a headers timeout longer than the request timeout.
  if (config.HTTP_HEADERS_TIMEOUT_MS > config.HTTP_REQUEST_TIMEOUT_MS) {
    throw new ConfigError(
      `invalid configuration:\n  HTTP_HEADERS_TIMEOUT_MS: must not exceed HTTP_REQUEST_TIMEOUT_MS (${config.HTTP_REQUEST_TIMEOUT_MS})`,
    );
  }
  return config;
}

export interface ModelConfig {
  baseURL: string;
  apiKey: string | undefined;
  model: string;
}

/** Workers cannot run without a model: there is no simulation mode. */
export function requireModel(config: Config): ModelConfig {
  const missing = (['LLM_BASE_URL', 'LLM_MODEL'] as const).filter((k) => !config[k]);
  if (missing.length > 0 || !config.LLM_BASE_URL || !config.LLM_MODEL) {
    throw new ConfigError(
      `no model configured: set ${missing.join(' and ')} (and LLM_API_KEY if the endpoint needs one) ` +
        'to an OpenAI-compatible endpoint, e.g. LLM_BASE_URL=http://127.0.0.1:4010/v1 LLM_MODEL=mock ' +
        'with `chatlane mock-llm` for local runs',
    );
  }
  return { baseURL: config.LLM_BASE_URL, apiKey: config.LLM_API_KEY, model: config.LLM_MODEL };
}

// ---------------------------------------------------------------------------
// mock-llm: the project's own OpenAI-compatible model server (src/mock-llm).
// Kept apart from `configSchema` because it runs as its own process and must not
// require the ingress/worker variables.
// ---------------------------------------------------------------------------

/** '250' or '100-400' (milliseconds); unset or blank means no added latency. */
const latencyRange = z
  .string()
  .optional()
  .transform((v, ctx): [number, number] => {
    if (v === undefined || v.trim() === '') return [0, 0];
    const m = /^\s*(\d+)\s*(?:-\s*(\d+)\s*)?$/.exec(v);
    const min = Number(m?.[1]);
    const max = m?.[2] === undefined ? min : Number(m[2]);
    if (!m || !Number.isSafeInteger(min) || !Number.isSafeInteger(max) || min > max) {
      ctx.addIssue({ code: 'custom', message: "must be 'n' or 'min-max' in ms with min <= max" });
      return z.NEVER;
    }
    return [min, max];
  });

/** Built when read, like `configSchema`: other processes load this module too. */
const mockLlmConfigSchema = () =>
  z.object({
    MOCK_LLM_HOST: z.string().min(1).default('127.0.0.1'),
    MOCK_LLM_PORT: int(4010).pipe(z.number().max(65535)),
    MOCK_LLM_LATENCY_MS: latencyRange,
    MOCK_LLM_CHUNK_MS: int(0).describe(
      'mock-llm: pause between the chunks of a streamed answer (0: all chunks at once), so clients see a reply grow',
    ),
  });

export type MockLlmConfig = z.infer<ReturnType<typeof mockLlmConfigSchema>>;

export function loadMockLlmConfig(env: NodeJS.ProcessEnv = process.env): MockLlmConfig {
  const parsed = mockLlmConfigSchema().safeParse(withoutBlanks(env), { jitless: true });
  if (!parsed.success) {
    const lines = parsed.error.issues.map((i) => `  ${i.path.join('.') || '(env)'}: ${i.message}`);
    throw new ConfigError(`invalid mock-llm configuration:\n${lines.join('\n')}`);
  }
  return parsed.data;
}
// --------------------------------------------------------------- end mock-llm

// ---------------------------------------------------------------------------
// loadtest: a client of a deployment; it reads only the API token it may need.
// ---------------------------------------------------------------------------

export function loadLoadtestEnv(env: NodeJS.ProcessEnv = process.env): {
  apiToken: string | undefined;
  webhookSecret: string | undefined;
} {
  const token = env.API_TOKEN?.trim();
  const secret = env.LOADTEST_WEBHOOK_SECRET?.trim();
  return { apiToken: token ? token : undefined, webhookSecret: secret ? secret : undefined };
}

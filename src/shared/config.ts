import { z } from 'zod';
import { accessShape, secretOf, webTokenShape } from './config-auth.js';
import { execShellProblems, execShellShape } from './config-exec-shell.js';
import { lanePolicies, laneShape } from './config-lanes.js';
import { type ModelConfig, modelChain, modelIdProblem, modelList, parseModelId } from './config-models.js';
import { otelProblems, otelShape } from './config-otel.js';
import { type GenericSource, genericSources } from './config-secrets.js';
import { toolApprovalProblems, toolApprovalShape } from './config-tool-approval.js';
import { clusterNodes, flag, int, latencyRange, nameList, optionalString } from './config-values.js';
import { DEFAULT_FILE_MEDIA_TYPES, type FilePolicy } from './file-parts.js';
import type { LanePolicies } from './lane-policy.js';
import type { EnabledPlatform } from './platforms/platform.js';
import { PLATFORMS, platformsFromEnv } from './platforms/registry.js';
import { loadPriceFile, type PriceTable } from './prices.js';
import { retentionShape } from './retention.js';
import { MAX_UNCOMMITTED_SENDS } from './store/uncommitted-limit.js';

export type { TrustProxy } from './config-auth.js';
export type { AllowedHost } from './config-exec-shell.js';
export {
  type ModelConfig,
  type ModelSpec,
  PROVIDERS,
  type ProviderName,
  type ProviderSettings,
  parseModelId,
} from './config-models.js';
export { type GenericSource, genericSecretsVariable } from './config-secrets.js';
export type { ClusterNode } from './config-values.js';

const httpUrl = optionalString.pipe(z.string().url().optional());

/**
 * The one place that reads the environment. Parsed once at boot; a bad value stops the
 * process with a message naming the variable (see `ConfigError`).
 */

/**
 * The environment's schema, built for the one parse at boot and then dropped: held in a
 * module constant, its zod objects (each carrying its own methods) would stay on every
 * process's heap for good (see docs/benchmarks.md, "Wrapper overhead"). Every variable carries a
 * one-line meaning (`.describe`): config-reference.ts builds its own copy of the schema to
 * generate docs/configuration.md and `chatlane config` from them, and names each one's roles.
 */
/** BUDGET_NOTICE's default, also the notice of a turn built without one (turn-budget.ts). */
export const DEFAULT_BUDGET_NOTICE =
  "I've reached today's limit for this conversation. Your messages are saved: write to me again tomorrow and I'll answer them.";

export const configSchema = () =>
  z.object({
    REDIS_URL: z
      .string()
      .url()
      .default('redis://127.0.0.1:6379')
      .describe('Redis to use; it must run with maxmemory-policy noeviction (and AOF in production)'),
    // When set, every connection is an ioredis Cluster over these nodes (REDIS_URL then only
    // lends its username, password and rediss: TLS to every node).
    REDIS_CLUSTER_NODES: clusterNodes.describe(
      'host:port,... of a Redis Cluster: every connection becomes a Cluster (REDIS_URL then only lends credentials and rediss: TLS)',
    ),
    // Sentinel (docs/production-redis.md): every connection asks these sentinels for the
    // master named REDIS_SENTINEL_NAME and follows it through a failover. REDIS_URL then only
    // lends the data nodes' username, password, db and rediss: TLS (sentinels included).
    REDIS_SENTINELS: clusterNodes.describe(
      'Sentinel mode: host:port,host:port of the sentinels to ask for the master (needs REDIS_SENTINEL_NAME; REDIS_URL then lends only credentials, db and rediss: TLS)',
    ),
    REDIS_SENTINEL_NAME: optionalString.describe(
      'Sentinel mode: the name of the master the sentinels monitor (needs REDIS_SENTINELS)',
    ),
    REDIS_SENTINEL_PASSWORD: optionalString.describe(
      'Sentinel mode: the password the sentinels themselves require (requirepass in sentinel.conf), if any',
    ),
    // Durability across a failover (docs/production-redis.md): acknowledge an ingest, and count
    // a commit or an outbox write as done, only once WAIT says N replicas have it.
    REDIS_REPLICA_ACKS: int(0, 0).describe(
      'Replicas that must confirm (Redis WAIT) an ingested message before its 202, and a commit or reply before the turn counts as done; 0 = do not wait',
    ),
    REDIS_REPLICA_ACKS_TIMEOUT_MS: int(500, 1).describe(
      'How long one WAIT for REDIS_REPLICA_ACKS replicas may take; then the ingest answers 503 REPLICATION_TIMEOUT (a retry is idempotent) and a worker retries the turn',
    ),
    // Braces would let a prefix steal the hash tag of every key; colons are our separator.
    CHATLANE_PREFIX: z
      .string()
      .regex(/^[A-Za-z0-9._-]{1,64}$/, 'must be 1-64 chars of [A-Za-z0-9._-]')
      .default('chatlane')
      .describe('prefix of every Redis key and queue, so several deployments can share one Redis'),
    HOST: z
      .string()
      .min(1)
      .default('0.0.0.0')
      .describe(
        'address the ingress, and the side port of workers, compactors and delivery processes, listen on',
      ),
    PORT: int(3000)
      .pipe(z.number().max(65535))
      .describe('ingress HTTP port; a taken port stops the process with a message naming PORT'),
    API_TOKEN: secretOf(32).describe(
      'bearer token of /v1/* (every route, every chat), at least 32 characters; set, /v1 refuses requests without a valid token (the load test sends it too)',
    ),
    // Bull Board at /admin/queues: mounted only when both are set (basic auth).
    ADMIN_USER: optionalString.describe(
      'Bull Board basic-auth user; the board at /admin/queues is mounted only when ADMIN_USER and ADMIN_PASSWORD are both set',
    ),
    ADMIN_PASSWORD: secretOf(12).describe(
      'Bull Board basic-auth password, at least 12 characters (see ADMIN_USER)',
    ),
    ADMIN_READ_ONLY: flag('false').describe(
      'Bull Board shows queues and jobs but refuses every action (405)',
    ),
    ...accessShape(),
    // Worker / compactor side port for /metrics, /healthz, /readyz. Unset: DEFAULT_METRICS_PORT
    // if it is free, else any free port (so several processes share a host with no setup).
    // Set: exactly that port (0 = any free port); a taken one stops the process.
    METRICS_PORT: z.coerce
      .number()
      .int()
      .min(0)
      .max(65535)
      .optional()
      .describe(
        'side port for /metrics, /healthz, /readyz; unset: 9100 when free, else any free port (logged as metricsUrl); set: exactly that port, 0 = any free port',
      ),
    // Queue-wide metrics (BullMQ job counts by state, completed/failed totals) describe the whole
    // fleet, so exactly one process should export them or sums over processes over-count.
    // Unset: the ingress does, workers and compactors do not. true/false overrides per process.
    QUEUE_METRICS: z
      .enum(['true', 'false', '1', '0'])
      .optional()
      .transform((v) => (v === undefined ? undefined : v === 'true' || v === '1'))
      .describe(
        'whether this process exports the queue-wide BullMQ metrics; unset: the ingress does, the other roles do not, so fleet sums count each queue once',
      ),
    LOG_LEVEL: z
      .enum(['fatal', 'error', 'warn', 'info', 'debug', 'trace', 'silent'])
      .default('info')
      .describe('pino log level'),

    // OpenTelemetry (docs/tracing.md): the standard OTEL_* variables (config-otel.ts).
    ...otelShape(),

    LLM_BASE_URL: httpUrl.describe(
      'endpoint of the openai-compatible provider (models with no provider prefix); a worker or compactor that needs it and lacks it stops naming it',
    ),
    LLM_API_KEY: optionalString.describe('API key sent to LLM_BASE_URL, if the endpoint needs one'),
    LLM_MODEL: optionalString.describe(
      'provider:model for turns (and for summaries unless COMPACTION_MODEL is set): openai:, anthropic:, google:, or openai-compatible: (the default without a prefix)',
    ),
    LLM_TIMEOUT_MS: int(120_000, 1000).describe(
      'longest one model call may take before it counts as a model timeout (a step gets this once per model of the fallback chain)',
    ),
    LLM_FALLBACK_MODELS: modelList.describe(
      'comma list of provider:model tried in order when a model call fails for an outage (5xx, timeout, refused connection, 429 after its retries); never on a refused message',
    ),
    OPENAI_API_KEY: optionalString.describe('API key of the openai: provider (OpenAI Responses API)'),
    OPENAI_BASE_URL: httpUrl.describe('base URL of the openai: provider; default https://api.openai.com/v1'),
    ANTHROPIC_API_KEY: optionalString.describe('API key of the anthropic: provider (Anthropic Messages API)'),
    ANTHROPIC_BASE_URL: httpUrl.describe(
      'base URL of the anthropic: provider; default https://api.anthropic.com/v1',
    ),
    GOOGLE_GENERATIVE_AI_API_KEY: optionalString.describe('API key of the google: provider (Gemini API)'),
    GOOGLE_GENERATIVE_AI_BASE_URL: httpUrl.describe(
      'base URL of the google: provider; default https://generativelanguage.googleapis.com/v1beta',
    ),

    WORKER_CONCURRENCY: int(32, 1).describe(
      'turns one worker process runs at once (= its concurrent model calls)',
    ),
    MAX_STEPS: int(16, 1).describe('model steps per turn'),
    MAX_MERGES_PER_TURN: int(8, 0).describe(
      'messages that arrive mid-turn and are folded into the running turn',
    ),
    // Lane policies (docs/lane-policies.md): debounce an idle chat's turn, interrupt a running one.
    ...laneShape(),
    MAX_MESSAGES_PER_TURN: int(20, 1).describe(
      'pending messages a turn starts with; the rest wait for the next turn',
    ),
    MAX_PENDING_PER_CHAT: int(1000, 1).describe(
      'inbox cap of one chat: a message beyond it is refused with 429 CHAT_FULL',
    ),
    MAX_INPUT_TOKENS: int(12_000, 256).describe('hard budget of what one model request may hold'),
    HISTORY_KEEP_LAST_MESSAGES: int(30, 1).describe('recent messages compaction always keeps verbatim'),
    HISTORY_WINDOW_MESSAGES: int(200, 1).describe('newest history messages a turn reads'),
    MAX_CHARS_PER_MESSAGE: int(4000, 100).describe(
      'text parts of one message beyond this are cut (with a note) before they reach the model, and counted as cut; history keeps them whole',
    ),
    // A turn's sends must all fit the chat's record of uncommitted sends: commit.lua counts
    // them there (a missing one refuses the commit), and a retry after a crash reads them.
    CHAT_SEND_MAX_PER_TURN: int(5, 1)
      .pipe(z.number().max(MAX_UNCOMMITTED_SENDS))
      .describe('chat_send calls allowed in one turn'),
    SYSTEM_PROMPT_FILE: optionalString.describe("file with the operator's system prompt (Agent.md style)"),

    // Agent capabilities (docs/agent.md, "Giving the agent capabilities"). MCP_CONFIG: a JSON file in
    // the Claude Desktop `mcpServers` format; checked at start, a bad file stops the worker.
    MCP_CONFIG: optionalString.describe(
      'JSON file of MCP servers (Claude Desktop mcpServers format, plus allowTools per server); a bad file stops the worker naming the field',
    ),
    MCP_TOOL_TIMEOUT_MS: int(30_000, 100).describe(
      "one MCP tool call's limit; past it the call is a tool error the model reads",
    ),
    // A tool result longer than this (as JSON) reaches the model and the history truncated.
    MCP_RESULT_MAX_CHARS: int(20_000, 200).describe(
      'an MCP tool result longer than this (as JSON) is cut to its text with a note',
    ),
    MCP_CONNECT_TIMEOUT_MS: int(10_000, 100).describe('time allowed to connect to one MCP server'),
    MCP_RECONNECT_MS: int(10_000, 100).describe('pause between reconnects to an MCP server that is down'),
    // The program's own tools (startChatlane's `tools`): held to the same rules as MCP tools, with
    // limits of their own, since code in the worker and a remote server fail in different ways.
    TOOL_TIMEOUT_MS: int(30_000, 100).describe(
      "one call of a tool given in code (startChatlane's tools); past it the call is a tool error the model reads",
    ),
    TOOL_RESULT_MAX_CHARS: int(20_000, 200).describe(
      'a result of a tool given in code longer than this (as JSON) is cut with a note',
    ),
    // context.once(key, fn): results kept in the chat's slot (docs/design.md, "once").
    ONCE_RESULT_MAX_BYTES: int(8192, 16).describe(
      "largest result (as JSON) a tool's context.once(key, fn) stores; fn's result over it is not kept and the call fails, without running fn again",
    ),
    ONCE_MAX_KEYS: int(200, 1).describe(
      'once keys kept per chat (context.once); past it the key written longest ago is forgotten',
    ),
    ONCE_KEEP_MS: int(7 * 24 * 3600 * 1000, 1000).describe(
      'how long a once result is kept after it was written (context.once); the chat also drops it with the chat',
    ),
    // A directory of skills (<skill>/SKILL.md with name and description front matter).
    SKILLS_DIR: optionalString.describe(
      'directory of skills, each <folder>/SKILL.md with name and description front matter',
    ),
    // Primary.md and other.md from here go into the system prompt right after its first line.
    PROFILE_DIR: optionalString.describe(
      'directory with Primary.md and/or other.md, placed in the system prompt right after its first line',
    ),
    // The per-chat memory document (chat_memory_update, /v1/chats/:chatKey/memory) is capped at this.
    MEMORY_MAX_TOKENS: int(1000, 1).describe(
      "cap of a chat's memory document (chat_memory_update and PUT /v1/chats/:chatKey/memory)",
    ),

    // Liveness (docs/design.md, "Recovery"): lease and job lock are renewed ~10× per period, so
    // a worker stalled up to ~7 s keeps its turns while a dead one's chats are taken over
    // within about JOB_LOCK_MS + STALLED_INTERVAL_MS.
    TURN_LEASE_MS: int(10_000, 100).describe(
      "a running turn's lease on its chat, checked every twentieth of it and renewed once a quarter of it has passed (shorter turns never renew)",
    ),
    JOB_LOCK_MS: int(10_000, 100).describe(
      'BullMQ job lock of a running turn, compaction or delivery; renewed every fifth to tenth of it',
    ),
    STALLED_INTERVAL_MS: int(1_000, 100).describe(
      "how often the fleet checks for jobs whose lock ran out (a dead worker's)",
    ),
    // Sweeper (DESIGN §5): re-enqueues chats with pending messages, no live job and no live lease.
    SWEEP_INTERVAL_MS: int(30_000, 100).describe(
      'how often one worker of the fleet sweeps for chats left with pending messages and no job',
    ),
    SWEEP_BATCH: int(1000, 1).describe(
      'chats one sweep checks (plus up to a tenth of it from failed turn jobs)',
    ),
    // Graceful shutdown: running turns get this long to finish. Keep it below the orchestrator's
    // kill deadline (docker-compose stop_grace_period: 40s for workers).
    SHUTDOWN_GRACE_MS: int(25_000, 0).describe(
      "how long a stopping process lets running work finish; plus 5 s it must stay below the orchestrator's kill deadline (compose: 40 s)",
    ),
    // Turns running at once across the whole fleet (BullMQ global concurrency on `turns`):
    // unset leaves the value stored in Redis alone, 0 removes the cap.
    TURNS_GLOBAL_CONCURRENCY: z.coerce
      .number()
      .int()
      .min(0)
      .optional()
      .describe(
        'cap on turns running at once across all workers (stored in Redis); unset leaves the stored value alone, 0 removes it',
      ),
    DEDUP_WINDOW_MS: int(7 * 24 * 3600 * 1000, 1000).describe(
      'how long message ids are remembered for idempotent ingest',
    ),
    // Per-chat event stream (~290 B an event), trimmed approximately (Redis MAXLEN ~).
    EVENTS_MAX_LEN: int(300, 10).describe(
      'cap of the per-chat event stream (about 290 bytes an event), trimmed approximately',
    ),
    BODY_LIMIT_BYTES: int(256 * 1024, 1024).describe(
      'largest request body the ingress accepts (413 BODY_TOO_LARGE beyond)',
    ),
    // Ingress: a Redis command not answered within this fails the request with 503 (a hung
    // Redis must not hang every request). Workers wait instead: see src/shared/redis.ts.
    REDIS_COMMAND_TIMEOUT_MS: int(1000, 0).describe(
      'ingress: a Redis command not answered in this time fails its request with 503 (0 = wait forever); workers never time commands out',
    ),
    // Slow clients (ingress): the request line and headers must arrive within the first, the whole
    // request (body included) within the second, or the client gets 408 and the connection is
    // closed. An idle keep-alive connection is closed after the third: keep it above the idle
    // timeout of the load balancer in front (AWS ALB: 60 s), so the balancer closes first.
    HTTP_HEADERS_TIMEOUT_MS: int(10_000, 1).describe(
      'ingress: the request line and headers must arrive within this, or 408 and the connection is closed',
    ),
    HTTP_REQUEST_TIMEOUT_MS: int(30_000, 1).describe(
      'ingress: the whole request, body included, must arrive within this (at least HTTP_HEADERS_TIMEOUT_MS)',
    ),
    HTTP_KEEP_ALIVE_TIMEOUT_MS: int(65_000, 1).describe(
      "ingress: an idle keep-alive connection is closed after this; keep it above the load balancer's idle timeout",
    ),
    // Requests one connection may carry before the server closes it (0 = no limit).
    HTTP_MAX_REQUESTS_PER_SOCKET: int(0, 0).describe(
      'ingress: requests per connection before the server closes it (0 = no limit, right behind a balancer that pools connections)',
    ),

    // Compaction (DESIGN §7). Token thresholds default to fractions of MAX_INPUT_TOKENS.
    COMPACT_AT_TOKENS: z.coerce
      .number()
      .int()
      .min(1)
      .optional()
      .describe(
        'a commit that leaves the history above this (or above 80 % of what the turn had for messages) enqueues a compaction; default 0.8 x MAX_INPUT_TOKENS',
      ),
    KEEP_RECENT_TOKENS: z.coerce
      .number()
      .int()
      .min(0)
      .optional()
      .describe('recent tokens compaction always keeps verbatim; default 0.4 x MAX_INPUT_TOKENS'),
    COMPACTION_MODEL: optionalString.describe(
      'provider:model for summaries (a cheaper one, say), then LLM_FALLBACK_MODELS; default LLM_MODEL',
    ),
    COMPACTION_MAX_TOKENS: int(1500, 64).describe('output cap of one summary'),
    COMPACTION_CONCURRENCY: int(4, 1).describe('compactions one compactor process runs at once'),
    ARCHIVE_ON_COMPACT: flag('true').describe(
      'keep the summarised originals in the chat archive (chat_history_search needs them)',
    ),

    // Delivery of outbox items to chats with a reply route (platforms, generic webhooks).
    // The worker process runs the delivery worker too unless this is false (then run
    // `chatlane delivery` processes).
    DELIVERY_IN_WORKER: flag('true').describe(
      'workers that have a platform or signed webhook configured also deliver replies; false leaves delivery to chatlane delivery processes',
    ),
    DELIVERY_CONCURRENCY: int(64, 1).describe('chats one process delivers to at once'),
    // Attempts per outbox item (every non-ok answer counts, rate limits included); then the
    // item is skipped and recorded as `delivery.failed`.
    DELIVERY_MAX_ATTEMPTS: int(10, 1).describe(
      'sends of one outbox item before it is given up on (every refusal counts, rate limits included)',
    ),
    DELIVERY_BACKOFF_MS: int(1000, 10).describe(
      'first retry delay of a refused send; doubles per attempt (plus or minus 20 %) unless the receiver said how long to wait',
    ),
    DELIVERY_BACKOFF_MAX_MS: int(60_000, 10).describe('cap of the delivery retry delay'),
    // One send's limit; a chat's delivery lease is derived from it (see src/worker/delivery).
    DELIVERY_TIMEOUT_MS: int(10_000, 100).describe(
      "one send's limit; a chat's delivery lease is 2 x this + 1 s",
    ),
    // Replies to platform chats shown as they are written (docs/platform-streaming.md): the
    // worker triggers delivery when a chat_send starts streaming, and delivery follows it.
    PLATFORM_STREAMING: z
      .enum(['on', 'off'])
      .default('off')
      .describe(
        'on shows replies to platform chats as they are written (drafts, native streams, or a post edited as it grows); off posts each reply whole',
      ),

    // Signed generic webhooks (POST /webhooks/generic/:source). Each source listed here needs
    // GENERIC_WEBHOOK_SECRETS_<NAME> (see `genericSources`).
    GENERIC_WEBHOOK_SOURCES: nameList(
      /^[a-z0-9][a-z0-9_-]{0,63}$/,
      'a source name (1-64 chars of [a-z0-9_-])',
    ).describe(
      'comma-separated source names accepted at POST /webhooks/generic/:source; each needs GENERIC_WEBHOOK_SECRETS_<NAME>',
    ),
    // Where replies may be POSTed (replyTo.url). Unset: any host whose addresses are all
    // public. Set: only these hosts (exact, or `*.example.com` for subdomains), which may then
    // also be private addresses (internal services the operator vouches for).
    GENERIC_WEBHOOK_REPLY_HOSTS: nameList(
      /^(\*\.)?[a-z0-9]([a-z0-9.-]{0,251}[a-z0-9])?$|^\[[0-9a-f:.]+\]$/,
      'a host name, *.domain, an IPv4 address or a [bracketed] IPv6 address (lowercase)',
    ).describe(
      'allowlist of replyTo.url hosts (hooks.example.com, *.example.com, 127.0.0.1, [::1]), which may then be private; unset: any host that resolves to public addresses only',
    ),
    // http: reply URLs (development against a local receiver); https only otherwise.
    GENERIC_WEBHOOK_REPLY_ALLOW_HTTP: flag('false').describe(
      'allow http: reply URLs (development); https only otherwise',
    ),

    // Streamed responses (GET /v1/chats/:chatKey/stream, POST /v1/ui, GET /v1/ui/:id/stream):
    // heartbeat comment interval, how many one ingress process serves in all and per chat, and
    // on a Redis Cluster the interval between reads of a chat with news, backing off to
    // SSE_POLL_MAX_MS while it is quiet (a single Redis is read with one blocking XREAD instead).
    SSE_HEARTBEAT_MS: int(15_000, 100).describe(
      'a heartbeat comment goes to every streamed response this often',
    ),
    SSE_MAX_CLIENTS: int(10_000, 1).describe(
      'streamed responses (live streams, /v1/ui replies and resumes) one ingress process serves at once (503 STREAM_CAPACITY beyond)',
    ),
    SSE_MAX_CLIENTS_PER_CHAT: int(10, 1).describe(
      'streamed responses of one chat one ingress process serves at once, every kind together (429 STREAM_LIMIT beyond): one browser token cannot use up SSE_MAX_CLIENTS',
    ),
    SSE_POLL_MS: int(250, 10).describe(
      "Redis Cluster only: how often a watched chat's streams are read after news",
    ),
    SSE_POLL_MAX_MS: int(1000, 10).describe(
      'Redis Cluster only: the read interval a quiet chat backs off to',
    ),

    WEB_TOKEN_SECRET: secretOf(32).describe(
      "HS256 secret of per-chat browser tokens (JWT, sub = chatKey, exp required) that open /v1/ui* and one chat's live stream, at least 32 characters; set, /v1 refuses requests without a valid token; unset: no browser tokens",
    ),
    ...webTokenShape(),
    WEB_ORIGINS: nameList(/^https?:\/\/[^\s,/]+$/, 'an origin (scheme://host[:port])').describe(
      'comma-separated browser origins allowed by CORS (e.g. https://app.example.com); unset: no cross-origin access',
    ),
    // Streaming a turn costs about twice the CPU of generating it whole, and Redis writes
    // nobody reads when nobody watches (docs/streaming.md, "When a turn streams").
    REPLY_STREAMING: z
      .enum(['auto', 'always', 'never'])
      .default('auto')
      .describe(
        'auto streams a turn only when its reply can be watched (a /v1/ui page or reader open for the chat, or PLATFORM_STREAMING for its platform thread), else generates it whole; always streams every turn (about twice the worker CPU per turn); never streams none (a /v1/ui reply arrives whole when its turn commits, platform replies are posted whole)',
      ),
    REPLY_STREAM_MAX_LEN: int(5000, 10).describe(
      'most UI message chunks kept in one reply stream (XADD MAXLEN ~); a longer reply keeps its newest chunks',
    ),
    REPLY_STREAM_TTL_MS: int(300_000, 1000).describe(
      'how long a reply stream (the live view of a reply for /v1/ui) lives after its last write',
    ),
    UI_WAIT_MS: int(600_000, 1000).describe(
      'longest POST /v1/ui waits for the turn that answers its message before it ends the response',
    ),

    // Contact book: entries not seen for this long are dropped. chat_contact_send (the model
    // writing to another chat found in it) only with CONTACT_SEND=on.
    CONTACTS_RETENTION_DAYS: int(90, 1).describe('contact book entries not seen for this long are dropped'),
    CONTACT_SEND: z
      .enum(['on', 'off'])
      .default('off')
      .describe('on gives the model chat_contact_send (writing to another chat found in the contact book)'),
    // exec_shell (docs/agent.md "exec_shell"): bash in a bubblewrap sandbox over the chat's workspace.
    ...execShellShape(),
    // Tool approval (docs/approvals.md): which tool calls wait for a person, and for how long.
    ...toolApprovalShape(),

    // File parts (docs/http-api.md "File parts"): at ingest only https: URLs and data: URLs up to
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
      })
      .describe(
        'comma-separated media types a file part may have (type/subtype or type/*); default images, PDF and plain text',
      ),
    FILE_DATA_URL_MAX_BYTES: int(128 * 1024, 0).describe("decoded size cap of a file part's data: URL"),
    FILE_FETCH_MAX_BYTES: int(10 * 1024 * 1024, 1).describe(
      "size cap of a worker's download of one https: file part for the model",
    ),
    FILE_FETCH_TIMEOUT_MS: int(10_000, 100).describe(
      'time limit of one file part download, redirects included',
    ),

    // When a message itself cannot be processed (docs/agent.md "When a message fails") the chat gets
    // this one notice and the message is kept in history marked failed.
    FAILURE_NOTICE: z
      .string()
      .max(2000)
      .default("Sorry — I couldn't process your last message. Please send it again.")
      .describe('the one notice a chat gets when its message cannot be processed'),
    // Model unreachable or refusing our credentials: the chat's turn waits this long, doubling
    // per consecutive failure of this worker's model calls up to the max, then tries again.
    MODEL_RETRY_BACKOFF_MS: int(2000, 10).describe(
      "after a model error (unreachable, 401/403, 404, 429, 5xx, timeout) the chat's turn waits this long, doubling per retry; its messages stay pending",
    ),
    MODEL_RETRY_BACKOFF_MAX_MS: int(60_000, 10).describe('cap of the model retry wait'),

    // Usage and cost (docs/usage-and-cost.md).
    MODEL_PRICES_FILE: optionalString.describe(
      'a JSON or YAML file of model prices in USD per million tokens of each kind: adds chatlane_model_cost_usd_total and `cost` to GET /v1/chats/:chatKey/usage; a bad file stops the process',
    ),
    CHAT_DAILY_TOKEN_BUDGET: int(0, 0).describe(
      'tokens (input + output) one chat may use per UTC day; past it the chat gets one notice and no model call until the next day, its messages kept in history (0 = no budget)',
    ),
    BUDGET_NOTICE: z
      .string()
      .min(1)
      .max(2000)
      .default(DEFAULT_BUDGET_NOTICE)
      .describe('the one notice a chat gets on a day it is over CHAT_DAILY_TOKEN_BUDGET'),
    ...retentionShape(),
    // Chat platforms (src/shared/platforms): each reads its own variables (TELEGRAM_BOT_TOKEN,
    // ...) through its module; a half-configured one stops the process. In group chats,
    // ingest every message (all) or only those that mention the bot (mentions).
    GROUP_MODE: z
      .enum(['all', 'mentions'])
      .default('mentions')
      .describe(
        'platforms: in group chats ingest only messages that mention the bot (mentions) or every message (all); private chats always',
      ),
    // How long one poller holds a platform's fleet-wide polling lease without renewing it.
    POLLER_LEASE_MS: int(15_000, 1000).describe(
      "platforms in polling mode: how long the fleet-wide poller lease lives without renewal (a dead poller's successor takes over after it)",
    ),
  });

type RawConfig = z.infer<ReturnType<typeof configSchema>>;
export type Config = Omit<RawConfig, 'COMPACT_AT_TOKENS' | 'KEEP_RECENT_TOKENS'> & {
  COMPACT_AT_TOKENS: number;
  KEEP_RECENT_TOKENS: number;
  /** GENERIC_WEBHOOK_SOURCES with their secrets. */
  GENERIC_WEBHOOKS: GenericSource[];
  /** Chat platforms the environment turns on (src/shared/platforms/registry.ts). */
  PLATFORMS: EnabledPlatform[];
  /** MODEL_PRICES_FILE, read and checked. */
  MODEL_PRICES: PriceTable | undefined;
  /** LANE_* and every channel's <CHANNEL>_LANE_* (docs/lane-policies.md). */
  LANES: LanePolicies;
};

/** Values that default to a share of another one. */
function derive(
  raw: RawConfig,
  sources: GenericSource[],
  platforms: EnabledPlatform[],
  prices: PriceTable | undefined,
  lanes: LanePolicies,
): Config {
  return {
    ...raw,
    LANES: lanes,
    MODEL_PRICES: prices,
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

/**
 * A configuration problem — a bad environment variable, a missing model, a tool name that
 * clashes with a built-in one, an unknown role — thrown before anything is opened. Its message
 * names the variable or option at fault, one line each; the CLI prints it and exits 2.
 */
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
  const prices =
    parsed.success && parsed.data.MODEL_PRICES_FILE
      ? loadPriceFile(parsed.data.MODEL_PRICES_FILE)
      : undefined;
  if (typeof prices === 'string') lines.push(`  MODEL_PRICES_FILE: ${prices}`);
  const lanes = parsed.success
    ? lanePolicies(parsed.data, vars, {
        platforms: PLATFORMS.map((p) => p.name),
        genericSources: generic.sources.map((s) => s.name),
      })
    : undefined;
  lines.push(...(lanes?.issues ?? []));
  if (!parsed.success || !lanes || lines.length > 0 || typeof prices === 'string') {
    throw new ConfigError(`invalid configuration:\n${lines.join('\n')}`);
  }
  const config = derive(parsed.data, generic.sources, platforms.platforms, prices, lanes.policies);
  const problems = [
    ...redisTopologyProblems(config),
    ...otelProblems(config),
    ...execShellProblems(config),
    ...toolApprovalProblems(config),
  ];
  if (problems.length > 0) throw new ConfigError(`invalid configuration:\n${problems.join('\n')}`);
  // Node refuses a headers timeout longer than the request timeout.
  if (config.HTTP_HEADERS_TIMEOUT_MS > config.HTTP_REQUEST_TIMEOUT_MS) {
    throw new ConfigError(
      `invalid configuration:\n  HTTP_HEADERS_TIMEOUT_MS: must not exceed HTTP_REQUEST_TIMEOUT_MS (${config.HTTP_REQUEST_TIMEOUT_MS})`,
    );
  }
  return config;
}

/** Half a Sentinel setup, or two topologies at once: each line names the variable to fix. */
function redisTopologyProblems(config: Config): string[] {
  const problems: string[] = [];
  const sentinels = (config.REDIS_SENTINELS?.length ?? 0) > 0;
  if (sentinels && !config.REDIS_SENTINEL_NAME)
    problems.push(
      '  REDIS_SENTINEL_NAME: missing: REDIS_SENTINELS is set, name the master the sentinels monitor',
    );
  if (!sentinels && config.REDIS_SENTINEL_NAME)
    problems.push(
      '  REDIS_SENTINELS: missing: REDIS_SENTINEL_NAME is set, list the sentinels (host:port,...)',
    );
  if (!sentinels && config.REDIS_SENTINEL_PASSWORD)
    problems.push(
      "  REDIS_SENTINEL_PASSWORD: set without REDIS_SENTINELS (it is the sentinels' own password)",
    );
  if (sentinels && (config.REDIS_CLUSTER_NODES?.length ?? 0) > 0)
    problems.push(
      '  REDIS_SENTINELS: set together with REDIS_CLUSTER_NODES; a deployment is one or the other',
    );
  // An ingress WAIT cut by the command timeout would be a 503 REDIS_UNAVAILABLE instead of the
  // documented REPLICATION_TIMEOUT, and would leave the connection blocked behind it.
  if (
    config.REDIS_REPLICA_ACKS > 0 &&
    config.REDIS_COMMAND_TIMEOUT_MS > 0 &&
    config.REDIS_REPLICA_ACKS_TIMEOUT_MS >= config.REDIS_COMMAND_TIMEOUT_MS
  )
    problems.push(
      `  REDIS_REPLICA_ACKS_TIMEOUT_MS: must be below REDIS_COMMAND_TIMEOUT_MS (${config.REDIS_COMMAND_TIMEOUT_MS})`,
    );
  return problems;
}

const NO_MODEL_HINT =
  'LLM_MODEL is provider:model, e.g. LLM_MODEL=openai:gpt-4o-mini with OPENAI_API_KEY, ' +
  'LLM_MODEL=anthropic:claude-sonnet-4-5 with ANTHROPIC_API_KEY, or google:… with GOOGLE_GENERATIVE_AI_API_KEY; ' +
  'an OpenAI-compatible server (vLLM, Ollama, LiteLLM) is a model without a prefix at LLM_BASE_URL, ' +
  'e.g. LLM_BASE_URL=http://127.0.0.1:4010/v1 LLM_MODEL=mock with `chatlane mock-llm` for local runs; see docs/models.md';

/** A role's chain, or a ConfigError naming every variable a model of it still needs. */
function chainOf(config: Config, variable: string, value: string): ModelConfig {
  const { config: models, problems } = modelChain(config, { variable, value }, config.LLM_FALLBACK_MODELS);
  if (problems.length > 0) throw new ConfigError(`invalid model configuration:\n${problems.join('\n')}`);
  return models;
}

/**
 * Workers cannot run without a model: there is no simulation mode. A half configuration (a
 * provider's key missing, for the role's model or a fallback) stops the process at its start,
 * not at its first model call.
 */
export function requireModel(config: Config): ModelConfig {
  if (!config.LLM_MODEL) {
    // Unprefixed is openai-compatible, so LLM_BASE_URL is named too when it is missing as well.
    const missing = config.LLM_BASE_URL ? 'LLM_MODEL' : 'LLM_BASE_URL and LLM_MODEL';
    throw new ConfigError(`no model configured: set ${missing} (${NO_MODEL_HINT})`);
  }
  const spec = parseModelId(config.LLM_MODEL);
  if (spec.provider === 'openai-compatible' && !config.LLM_BASE_URL && !modelIdProblem(config.LLM_MODEL)) {
    throw new ConfigError(`no model configured: set LLM_BASE_URL (${NO_MODEL_HINT})`);
  }
  return chainOf(config, 'LLM_MODEL', config.LLM_MODEL);
}

/** The compactor's models: COMPACTION_MODEL (a cheaper one, say) or LLM_MODEL, then the fallbacks. */
export function requireCompactionModel(config: Config): ModelConfig {
  if (!config.COMPACTION_MODEL) return requireModel(config);
  return chainOf(config, 'COMPACTION_MODEL', config.COMPACTION_MODEL);
}

// ---------------------------------------------------------------------------
// mock-llm: the project's own OpenAI-compatible model server (src/mock-llm).
// Kept apart from `configSchema` because it runs as its own process and must not
// require the ingress/worker variables.
// ---------------------------------------------------------------------------

/** Built when read, like `configSchema`: other processes load this module too. */
export const mockLlmConfigSchema = () =>
  z.object({
    MOCK_LLM_HOST: z.string().min(1).default('127.0.0.1').describe('address the mock model listens on'),
    MOCK_LLM_PORT: int(4010).pipe(z.number().max(65535)).describe('port the mock model listens on'),
    MOCK_LLM_LATENCY_MS: latencyRange.describe(
      "the mock model's added latency per request: n or min-max milliseconds",
    ),
    MOCK_LLM_CHUNK_MS: int(0).describe(
      'pause between the chunks of a streamed answer (0: all chunks at once), so clients see a reply grow',
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

import { randomBytes } from 'node:crypto';
import { parseArgs } from 'node:util';
import { z } from 'zod';

/**
 * `chatlane loadtest` flags: one table drives parsing, validation and `--help`, so every flag
 * is documented by construction. Every size and time has a hard ceiling: the tool must not
 * be able to run unbounded against someone's deployment by a typo.
 */

export const LIMITS = {
  chats: 100_000,
  messages: 10_000,
  totalMessages: 1_000_000,
  durationS: 3600,
  drainS: 600,
  maxRequests: 10_000_000,
  rate: 100_000,
  connections: 100_000,
  maxInflight: 4096,
  maxStreams: 10_000,
} as const;

interface Flag {
  name: string;
  arg?: string;
  short?: string;
  help: string;
  default?: string;
  boolean?: boolean;
}

export const FLAGS: readonly Flag[] = [
  {
    name: 'url',
    arg: 'url',
    help: 'the ingress to drive (http or https); nothing but it and --mock-url is contacted',
  },
  {
    name: 'via',
    arg: 'api|webhook',
    default: 'api',
    help:
      'how messages go in: the HTTP API, or signed generic webhooks (replies then come back to a ' +
      'receiver this process runs, and their delivery is measured and checked)',
  },
  { name: 'source', arg: 'name', default: 'loadtest', help: '--via webhook: the generic webhook source' },
  {
    name: 'webhook-secret',
    arg: 'whsec_…',
    help: "--via webhook: the source's secret (default: LOADTEST_WEBHOOK_SECRET from the environment)",
  },
  {
    name: 'receiver',
    arg: 'host:port',
    default: '127.0.0.1:0',
    help: '--via webhook: where the reply receiver listens (port 0 = any free port)',
  },
  {
    name: 'reply-url',
    arg: 'url',
    help: "--via webhook: the receiver's URL as the deployment reaches it (default: http://<receiver>/)",
  },
  {
    name: 'token',
    arg: 'token',
    help: 'bearer token for the HTTP API (default: API_TOKEN from the environment)',
  },
  { name: 'chats', arg: 'n', default: '100', help: `chats to talk to (max ${LIMITS.chats})` },
  { name: 'messages', arg: 'n', default: '5', help: `messages per chat (max ${LIMITS.messages})` },
  {
    name: 'rate',
    arg: 'msgs/s',
    help: 'open model: messages arrive at this mean rate (Poisson), whether or not replies came',
  },
  {
    name: 'connections',
    arg: 'n',
    help:
      'closed loop (the default, with min(chats, 50)): n simulated users, each plays one chat at a ' +
      'time — send, wait for the reply, think, send the next',
  },
  {
    name: 'think',
    arg: 'ms|min-max',
    default: '0',
    help: 'closed loop: pause between a reply and the next message (fixed or uniform range)',
  },
  {
    name: 'bursts',
    arg: '0..1',
    default: '0.2',
    help: 'share of sends that are bursts: several messages to one chat at once (lane merge)',
  },
  { name: 'burst-size', arg: 'n', default: '3', help: 'messages in a burst' },
  { name: 'burst-window', arg: 'ms', default: '50', help: "a burst's messages are spread over this window" },
  {
    name: 'profile',
    arg: 'steady|typing',
    default: 'steady',
    help:
      'typing: people typing in bursts — every step is 2-4 messages 300-900 ms apart (--bursts, ' +
      '--burst-size and --burst-window are not used); the report adds model calls and replies per ' +
      "burst and the time from a burst's last message to its first reply",
  },
  {
    name: 'duration',
    arg: 's',
    default: '60',
    help: `stop sending after this many seconds (max ${LIMITS.durationS})`,
  },
  {
    name: 'drain',
    arg: 's',
    default: '60',
    help: `then wait at most this long for the last replies (max ${LIMITS.drainS})`,
  },
  { name: 'seed', arg: 'n', default: '1', help: 'schedule seed: the same seed gives the same schedule' },
  {
    name: 'run-id',
    arg: 'id',
    help: 'chat keys are lt-<run-id>-<n> and message ids lt-<run-id>-<n>-<m> (default: random)',
  },
  { name: 'text-bytes', arg: 'n', default: '48', help: 'length of each message text' },
  {
    name: 'max-inflight',
    arg: 'n',
    default: '256',
    help: `HTTP requests in flight at most (max ${LIMITS.maxInflight})`,
  },
  { name: 'timeout', arg: 'ms', default: '10000', help: 'per-request timeout' },
  {
    name: 'retries',
    arg: 'n',
    default: '3',
    help: 'retries of a failed send (5xx, 429, network), with the same message id',
  },
  {
    name: 'replies',
    arg: 'auto|stream|poll',
    default: 'auto',
    help:
      "how replies are seen: each waiting chat's live stream (SSE, pushed as they happen), or " +
      'polling its outbox; auto = the stream when the deployment serves it, else polling',
  },
  {
    name: 'max-streams',
    arg: 'n',
    default: '1000',
    help: `live streams open at once at most; chats beyond are polled (max ${LIMITS.maxStreams})`,
  },
  {
    name: 'poll-interval',
    arg: 'ms',
    default: '100',
    help: "replies are read from each waiting chat's outbox at most this often",
  },
  { name: 'poll-concurrency', arg: 'n', default: '16', help: 'outbox/event polls in flight at most' },
  {
    name: 'max-requests',
    arg: 'n',
    default: '1000000',
    help: `hard cap on HTTP requests of the whole run (max ${LIMITS.maxRequests})`,
  },
  {
    name: 'mock-url',
    arg: 'url',
    help: 'the `chatlane mock-llm` the workers use: checks per-chat model concurrency via its /stats',
  },
  { name: 'out', arg: 'file', help: 'write the JSON report to this file' },
  { name: 'json', boolean: true, help: 'print the JSON report on stdout instead of the summary' },
  {
    name: 'progress',
    arg: 'auto|tty|plain|off',
    default: 'auto',
    help: 'progress on stderr: a live line on a terminal, a plain line every 5 s otherwise',
  },
  { name: 'help', short: 'h', boolean: true, help: 'show this help' },
];

export const HELP = `usage: chatlane loadtest --url <ingress> [options]

Drives a running chatlane deployment through its HTTP API only: N chats × M messages, in
an open model (--rate) or a closed loop (--connections), with bursts that land in running
turns. Measures acks, end-to-end reply latency (send → reply seen on the chat's live stream,
or in its outbox when there is no stream), turns and merges, fairness and errors; then
checks that every acknowledged message is in its chat's history exactly once and in order,
that every chat was answered and nothing is pending, and (with --mock-url) that the model
never saw two requests of one chat at once. Exits 0 when every check holds, 1 when one
fails, 2 on bad usage.

options:
${FLAGS.map((f) => {
  const left = `  ${f.short ? `-${f.short}, ` : ''}--${f.name}${f.arg ? ` <${f.arg}>` : ''}`;
  const def = f.default !== undefined ? ` (default ${f.default})` : '';
  return `${left.padEnd(34)} ${f.help}${def}`;
}).join('\n')}

example:
  chatlane loadtest --url http://127.0.0.1:3000 --chats 200 --messages 5 --rate 100 --out report.json`;

export class UsageError extends Error {
  override name = 'UsageError';
}

export type ThinkRange = [number, number];

export interface LoadtestOptions {
  url: URL;
  via: 'api' | 'webhook';
  source: string;
  webhookSecret: string | undefined;
  receiver: { host: string; port: number };
  replyUrl: string | undefined;
  token: string | undefined;
  chats: number;
  messages: number;
  mode: 'open' | 'closed';
  /** Open model: messages per second. */
  rate: number;
  /** Closed loop: simulated users. */
  connections: number;
  thinkMs: ThinkRange;
  burstShare: number;
  burstSize: number;
  burstWindowMs: number;
  /** `typing`: every step a burst of 2-4 messages 300-900 ms apart (schedule.ts). */
  profile: 'steady' | 'typing';
  durationS: number;
  drainS: number;
  seed: number;
  runId: string;
  textBytes: number;
  maxInflight: number;
  timeoutMs: number;
  retries: number;
  replies: 'auto' | 'stream' | 'poll';
  maxStreams: number;
  pollIntervalMs: number;
  pollConcurrency: number;
  maxRequests: number;
  mockUrl: URL | undefined;
  out: string | undefined;
  json: boolean;
  progress: 'auto' | 'tty' | 'plain' | 'off';
}

function httpUrl(name: string) {
  return z.string().transform((raw, ctx) => {
    let url: URL;
    try {
      url = new URL(raw);
    } catch {
      ctx.addIssue({ code: 'custom', message: `--${name}: '${raw}' is not an absolute URL` });
      return z.NEVER;
    }
    if (url.protocol !== 'http:' && url.protocol !== 'https:') {
      ctx.addIssue({ code: 'custom', message: `--${name}: only http and https URLs, not ${url.protocol}` });
      return z.NEVER;
    }
    if (url.username || url.password) {
      ctx.addIssue({ code: 'custom', message: `--${name}: no credentials in the URL (use --token)` });
      return z.NEVER;
    }
    if (url.search || url.hash) {
      ctx.addIssue({ code: 'custom', message: `--${name}: no query or fragment` });
      return z.NEVER;
    }
    return url;
  });
}

const int = (name: string, min: number, max: number) =>
  z.coerce
    .number({ message: `--${name} must be a number` })
    .int(`--${name} must be a whole number`)
    .min(min, `--${name} must be at least ${min}`)
    .max(max, `--${name} must be at most ${max}`);

const num = (name: string, min: number, max: number) =>
  z.coerce
    .number({ message: `--${name} must be a number` })
    .min(min, `--${name} must be at least ${min}`)
    .max(max, `--${name} must be at most ${max}`);

const thinkSchema = z.string().transform((raw, ctx): ThinkRange => {
  const m = /^\s*(\d+)\s*(?:-\s*(\d+)\s*)?$/.exec(raw);
  const min = Number(m?.[1]);
  const max = m?.[2] === undefined ? min : Number(m[2]);
  if (!m || min > max || max > 3_600_000) {
    ctx.addIssue({ code: 'custom', message: "--think must be 'ms' or 'min-max' (ms, min <= max)" });
    return z.NEVER;
  }
  return [min, max];
});

const RUN_ID = /^[A-Za-z0-9._-]{1,40}$/;

const schema = z
  .object({
    url: httpUrl('url'),
    via: z.enum(['api', 'webhook'], { message: '--via must be api or webhook' }),
    source: z.string().regex(/^[a-z0-9][a-z0-9_-]{0,63}$/, '--source must be 1-64 characters of [a-z0-9_-]'),
    'webhook-secret': z.string().min(1).optional(),
    receiver: z.string().transform((raw, ctx) => {
      const m = /^(?:\[([^\]]+)\]|([^:\s]+)):(\d{1,5})$/.exec(raw);
      const port = Number(m?.[3]);
      if (!m || port > 65535) {
        ctx.addIssue({ code: 'custom', message: '--receiver must be host:port' });
        return z.NEVER;
      }
      return { host: (m[1] ?? m[2])!, port };
    }),
    'reply-url': httpUrl('reply-url').optional(),
    token: z.string().min(1).optional(),
    chats: int('chats', 1, LIMITS.chats),
    messages: int('messages', 1, LIMITS.messages),
    rate: num('rate', 0.001, LIMITS.rate).optional(),
    connections: int('connections', 1, LIMITS.connections).optional(),
    think: thinkSchema,
    bursts: num('bursts', 0, 1),
    'burst-size': int('burst-size', 2, 100),
    'burst-window': int('burst-window', 0, 60_000),
    profile: z.enum(['steady', 'typing'], { message: '--profile must be steady or typing' }),
    duration: num('duration', 0.1, LIMITS.durationS),
    drain: num('drain', 0, LIMITS.drainS),
    seed: int('seed', 0, 2 ** 32 - 1),
    'run-id': z.string().regex(RUN_ID, '--run-id must be 1-40 characters of [A-Za-z0-9._-]').optional(),
    'text-bytes': int('text-bytes', 16, 100_000),
    'max-inflight': int('max-inflight', 1, LIMITS.maxInflight),
    timeout: int('timeout', 100, 600_000),
    retries: int('retries', 0, 20),
    replies: z.enum(['auto', 'stream', 'poll'], { message: '--replies must be auto, stream or poll' }),
    'max-streams': int('max-streams', 1, LIMITS.maxStreams),
    'poll-interval': int('poll-interval', 10, 60_000),
    'poll-concurrency': int('poll-concurrency', 1, 1024),
    'max-requests': int('max-requests', 1, LIMITS.maxRequests),
    'mock-url': httpUrl('mock-url').optional(),
    out: z.string().min(1).optional(),
    json: z.boolean().default(false),
    progress: z.enum(['auto', 'tty', 'plain', 'off'], {
      message: '--progress must be auto, tty, plain or off',
    }),
  })
  .superRefine((v, ctx) => {
    if (v.rate !== undefined && v.connections !== undefined) {
      ctx.addIssue({
        code: 'custom',
        message: '--rate (open model) and --connections (closed loop) exclude each other',
      });
    }
    if (v.chats * v.messages > LIMITS.totalMessages) {
      ctx.addIssue({
        code: 'custom',
        message: `--chats × --messages must be at most ${LIMITS.totalMessages} (got ${v.chats * v.messages})`,
      });
    }
  });

/** Parses argv (without the `loadtest` word). Returns `'help'` for -h/--help. */
export function parseLoadtestArgs(
  argv: string[],
  env: { apiToken?: string | undefined; webhookSecret?: string | undefined } = {},
): LoadtestOptions | 'help' {
  let values: Record<string, string | boolean | undefined>;
  try {
    ({ values } = parseArgs({
      args: argv,
      strict: true,
      allowPositionals: false,
      options: Object.fromEntries(
        FLAGS.map((f) => [
          f.name,
          {
            type: f.boolean ? ('boolean' as const) : ('string' as const),
            ...(f.short && { short: f.short }),
          },
        ]),
      ),
    }));
  } catch (err) {
    throw new UsageError((err as Error).message);
  }
  if (values.help) return 'help';
  if (values.url === undefined)
    throw new UsageError('--url is required (the ingress, e.g. http://127.0.0.1:3000)');

  const withDefaults: Record<string, unknown> = {};
  for (const f of FLAGS) withDefaults[f.name] = values[f.name] ?? f.default;
  const parsed = schema.safeParse(withDefaults);
  if (!parsed.success) throw new UsageError(parsed.error.issues.map((i) => i.message).join('\n'));
  const v = parsed.data;
  const webhookSecret = v['webhook-secret'] ?? env.webhookSecret;
  if (v.via === 'webhook' && !webhookSecret) {
    throw new UsageError(
      "--via webhook needs --webhook-secret (or LOADTEST_WEBHOOK_SECRET): the source's whsec_ secret",
    );
  }
  const mode = v.rate !== undefined ? 'open' : 'closed';
  // The mock model's counters live at its root, beside the `/v1` an LLM_BASE_URL names.
  const mockUrl = v['mock-url'];
  if (mockUrl) mockUrl.pathname = mockUrl.pathname.replace(/\/v1\/?$/, '/');
  return {
    url: v.url,
    via: v.via,
    source: v.source,
    webhookSecret,
    receiver: v.receiver,
    replyUrl: v['reply-url']?.href,
    token: v.token ?? env.apiToken,
    chats: v.chats,
    messages: v.messages,
    mode,
    rate: v.rate ?? 0,
    connections: Math.min(v.chats, v.connections ?? 50),
    thinkMs: v.think,
    burstShare: v.bursts,
    burstSize: v['burst-size'],
    burstWindowMs: v['burst-window'],
    profile: v.profile,
    durationS: v.duration,
    drainS: v.drain,
    seed: v.seed,
    runId: v['run-id'] ?? randomBytes(4).toString('hex'),
    textBytes: v['text-bytes'],
    maxInflight: v['max-inflight'],
    timeoutMs: v.timeout,
    retries: v.retries,
    replies: v.replies,
    maxStreams: v['max-streams'],
    pollIntervalMs: v['poll-interval'],
    pollConcurrency: v['poll-concurrency'],
    maxRequests: v['max-requests'],
    mockUrl,
    out: v.out,
    json: v.json,
    progress: v.progress,
  };
}

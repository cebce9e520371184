import { SignJWT } from 'jose';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { ERROR_CODES } from '../../src/ingress/errors.js';
import type { ResolveAll } from '../../src/shared/address-policy.js';
import { waitReady } from '../../src/shared/redis.js';
import { mintWebToken } from '../../src/shared/web-token.js';
import { standardSources } from '../../src/shared/webhooks/standard.js';
import { Fuzz, fuzzSeed } from '../helpers/fuzz.js';
import { type FuzzRequest, type FuzzTargets, fuzzRequest } from '../helpers/http-fuzz.js';
import { listeningIngress, queueMetaWritten, type TestIngress } from '../helpers/ingress.js';
import { deletePrefix, keysUnder, randomPrefix, testRedis } from '../helpers/redis.js';
import { webhookSecret } from '../helpers/webhooks.js';

/**
 * The whole HTTP surface against thousands of random requests — bodies, headers, credentials,
 * cursors, chatKeys — on a real ingress (listening, real HTTP) configured as in production:
 * API_TOKEN, WEB_TOKEN_SECRET, WEB_ORIGINS, a signed generic webhook source and Bull Board.
 * No answer may be a 5xx, every error must be in the documented shape, and an answer of 4xx
 * must leave Redis as it was: requests run in small batches, and a batch whose answers are
 * all refusals (or reads) must leave every key of the prefix and its content as they were.
 * The seed is in every failure message: `FUZZ_SEED=<seed>` replays the same requests.
 */

const REQUESTS = 3000;
const AT_ONCE = 8;
const SECRET = 'a-web-token-secret-of-at-least-32-characters';
const API_TOKEN = 'the-api-token-of-the-fuzzed-ingress';
const ORIGIN = 'https://app.example.com';
const WEBHOOK_SECRET = webhookSecret();
const CHATS = ['alpha', 'beta', 'gamma', 'telegram-chat-42', 'generic:ticket-7'];

const redis = testRedis('ingress');
const prefix = randomPrefix('httpfuzz');
const seed = fuzzSeed();
let ing: TestIngress;
let base: string;
let targets: FuzzTargets;

/** DNS for the run: one name points inside (refused at ingest), every other is public. */
const dns: ResolveAll = (hostname, _options, callback) =>
  callback(null, [{ address: hostname === 'inside.example' ? '10.0.0.5' : '93.184.216.34', family: 4 }]);

const b64url = (value: object) => Buffer.from(JSON.stringify(value)).toString('base64url');

beforeAll(async () => {
  await waitReady(redis);
  let port: number;
  ({ ing, port } = await listeningIngress(redis, prefix, {
    apiToken: API_TOKEN,
    web: { tokenSecret: SECRET, origins: [ORIGIN], waitMs: 60_000 },
    genericWebhooks: {
      sources: standardSources([{ name: 'crm', secrets: [WEBHOOK_SECRET] }]),
      replyPolicy: { allowHttp: false, hosts: [] },
    },
    admin: { user: 'ops', password: 'a-long-admin-password' },
    streams: { heartbeatMs: 60_000 },
    resolve: dns,
  }));
  base = `http://127.0.0.1:${port}`;
  await queueMetaWritten(redis, prefix);
  const now = Math.floor(Date.now() / 1000);
  const key = new TextEncoder().encode(SECRET);
  targets = {
    apiToken: API_TOKEN,
    browserTokens: Object.fromEntries(
      await Promise.all(CHATS.map(async (c) => [c, await mintWebToken(SECRET, c)] as const)),
    ),
    badBrowserTokens: [
      await new SignJWT({})
        .setProtectedHeader({ alg: 'HS256' })
        .setSubject('alpha')
        .setExpirationTime(now - 60)
        .sign(key),
      await new SignJWT({}).setProtectedHeader({ alg: 'HS256' }).setSubject('alpha').sign(key),
      await mintWebToken('another-secret-that-is-also-32-characters-long', 'alpha'),
      `${b64url({ alg: 'none', typ: 'JWT' })}.${b64url({ sub: 'alpha', exp: now + 600 })}.`,
      'a.b.c',
      'not-a-jwt',
    ],
    origin: ORIGIN,
    source: { name: 'crm', secret: WEBHOOK_SECRET },
    admin: { user: 'ops', password: 'a-long-admin-password' },
    chats: CHATS,
  };
});
afterAll(async () => {
  // fetch keeps its sockets to the server open (keep-alive, cancelled streams): drop them.
  const closeAll = setInterval(() => ing.app.server.closeAllConnections(), 20);
  await ing.close();
  clearInterval(closeAll);
  await deletePrefix(redis, prefix);
  redis.disconnect();
});

interface Answer {
  status: number;
  contentType: string;
  body: string;
  error?: string;
}

/** A header value fetch can send (Latin-1 printable); others go percent-encoded. */
const headerSafe = (value: string) => (/^[\x20-\x7e]*$/.test(value) ? value : encodeURIComponent(value));

async function send(req: FuzzRequest): Promise<Answer> {
  const abort = new AbortController();
  const timer = setTimeout(() => abort.abort(), 15_000);
  try {
    const headers = Object.fromEntries(Object.entries(req.headers).map(([k, v]) => [k, headerSafe(v)]));
    const res = await fetch(`${base}${req.path}`, {
      method: req.method,
      headers,
      redirect: 'manual',
      signal: abort.signal,
      ...(req.body !== undefined && !['GET', 'HEAD'].includes(req.method) && { body: req.body }),
    });
    const contentType = res.headers.get('content-type') ?? '';
    // A stream that opened is dropped at once: what matters is that it was answered.
    const body = contentType.startsWith('text/event-stream') ? '' : await res.text();
    return { status: res.status, contentType, body };
  } catch (err) {
    return { status: 0, contentType: '', body: '', error: String(err) };
  } finally {
    clearTimeout(timer);
    abort.abort();
  }
}

/**
 * A key's content as text, element order normalised where Redis keeps none (hash, set): DUMP
 * would not do, a hash in a hash table serializes in its table's order, which an incremental
 * rehash changes without any write.
 */
const CONTENT: Record<string, (key: string) => Promise<unknown>> = {
  string: (k) => redis.get(k),
  list: (k) => redis.lrange(k, 0, -1),
  hash: async (k) => Object.entries(await redis.hgetall(k)).sort(),
  set: async (k) => (await redis.smembers(k)).sort(),
  zset: (k) => redis.zrange(k, 0, -1, 'WITHSCORES'),
  stream: (k) => redis.xrange(k, '-', '+'),
};

/** Every key of the prefix with its content (TTLs aside): what "nothing written" compares. */
async function keyspace(): Promise<Map<string, string>> {
  // A chat's watch key is written by an open /v1/ui response's own timer and expires by
  // itself within the run: neither is a refusal's write.
  const keys = (await keysUnder(redis, prefix)).filter((k) => !k.endsWith(':watch'));
  const values = await Promise.all(
    keys.map(async (k) => {
      const type = await redis.type(k);
      return `${type} ${JSON.stringify(await (CONTENT[type]?.(k) ?? type))}`;
    }),
  );
  return new Map(keys.map((k, i) => [k, values[i]!]));
}

function changedKeys(before: Map<string, string>, after: Map<string, string>): string[] {
  const names = new Set([...before.keys(), ...after.keys()]);
  return [...names].filter((k) => before.get(k) !== after.get(k));
}

const READS = new Set(['GET', 'HEAD', 'OPTIONS']);
const show = (req: FuzzRequest, a: Answer) =>
  `${req.method} ${req.path} ${JSON.stringify(req.headers).slice(0, 300)} ${(req.body ?? '').slice(0, 200)} → ${a.status} ${a.body.slice(0, 200)}${a.error ? ` (${a.error})` : ''}`;

/** The documented error shape with a registry code and its status; undefined when it holds. */
function shapeProblem(req: FuzzRequest, a: Answer): string | undefined {
  if (req.method === 'HEAD' || a.status < 400) return undefined;
  if (!a.contentType.startsWith('application/json')) return `content-type ${a.contentType}`;
  try {
    const { error } = JSON.parse(a.body) as { error?: { code?: string; message?: unknown } };
    const code = error?.code as keyof typeof ERROR_CODES | undefined;
    if (!code || !(code in ERROR_CODES) || typeof error?.message !== 'string')
      return 'not { error: { code, message } }';
    return ERROR_CODES[code] === a.status ? undefined : `${code} is not ${a.status}`;
  } catch {
    return 'not JSON';
  }
}

describe(`the HTTP surface under ${REQUESTS} random requests (FUZZ_SEED=${seed})`, () => {
  it('answers no 5xx, every error in the documented shape, and writes nothing on a 4xx', {
    timeout: 120_000,
  }, async () => {
    const f = new Fuzz(seed);
    const failures: string[] = [];
    const statuses = new Map<number, number>();
    let refused = 0;
    let refusedChecked = 0;

    async function run(batch: FuzzRequest[], check: boolean): Promise<void> {
      const before = check ? await keyspace() : undefined;
      const answers = await Promise.all(batch.map(send));
      answers.forEach((a, i) => {
        const req = batch[i]!;
        statuses.set(a.status, (statuses.get(a.status) ?? 0) + 1);
        if (a.status === 0 || a.status >= 500) failures.push(`no answer or 5xx: ${show(req, a)}`);
        const shape = shapeProblem(req, a);
        if (shape) failures.push(`error shape (${shape}): ${show(req, a)}`);
      });
      const fourxx = answers.filter((a) => a.status >= 400 && a.status < 500).length;
      refused += fourxx;
      // Only a batch of refusals and reads says anything about the refusals' writes.
      const comparable = answers.every((a, i) => a.status >= 400 || READS.has(batch[i]!.method));
      if (!before || !comparable || fourxx === 0) return;
      refusedChecked += fourxx;
      const changed = changedKeys(before, await keyspace());
      if (changed.length > 0) {
        failures.push(
          `a batch of refusals wrote ${changed.slice(0, 5).join(', ')}:\n  ${batch.map((r, i) => show(r, answers[i]!)).join('\n  ')}`,
        );
      }
    }

    const pending: Record<FuzzRequest['intent'], FuzzRequest[]> = { hostile: [], valid: [] };
    for (let i = 0; i < REQUESTS; i++) {
      const req = fuzzRequest(f, targets);
      const queue = pending[req.intent];
      queue.push(req);
      if (queue.length === AT_ONCE) await run(queue.splice(0), req.intent === 'hostile');
    }
    await run(pending.hostile, true);
    await run(pending.valid, false);

    const summary = `FUZZ_SEED=${seed}; statuses ${JSON.stringify(Object.fromEntries(statuses))}`;
    // A few of each kind of failure, so one common kind does not hide the others.
    const shown = ['no answer or 5xx', 'error shape', 'a batch of refusals wrote'].flatMap((kind) =>
      failures.filter((x) => x.startsWith(kind)).slice(0, 4),
    );
    expect(shown, `${summary}\n${failures.length} failures`).toEqual([]);
    // The run reached both sides, and most refusals were checked for writes.
    expect((statuses.get(202) ?? 0) + (statuses.get(200) ?? 0), summary).toBeGreaterThan(100);
    expect(refusedChecked, `${summary}; ${refusedChecked} of ${refused} refusals checked`).toBeGreaterThan(
      refused * 0.6,
    );
  });
});

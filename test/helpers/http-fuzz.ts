import { createHmac } from 'node:crypto';
import {
  type Fuzz,
  HOSTILE_CHARS,
  integerText,
  MAX_STREAM_CURSOR,
  streamCursorText,
  streamIdText,
} from './fuzz.js';

/**
 * Random requests against the whole HTTP surface of an ingress, as a hostile client would send
 * them: every route (and some that do not exist) with random methods, chatKeys, queries,
 * credentials, headers and bodies. Most requests are near misses of valid ones, so they get
 * past the first check and reach the deeper ones; some are valid, so the valid paths run too.
 */

export interface FuzzRequest {
  method: string;
  path: string;
  headers: Record<string, string>;
  body?: string;
  /** Built to be refused (a near miss or junk), or to be valid. */
  intent: 'hostile' | 'valid';
}

/** What the requests may use: real credentials, names and secrets of the ingress under test. */
export interface FuzzTargets {
  apiToken: string;
  /** A browser token per chat (for chats in `chats`), and tokens that must fail. */
  browserTokens: Record<string, string>;
  badBrowserTokens: string[];
  origin: string;
  /** The generic webhook source's name and its raw secret bytes (base64 after `whsec_`). */
  source: { name: string; secret: string };
  admin: { user: string; password: string };
  /** chatKeys the valid requests use (a small set, so the keyspace stays small). */
  chats: string[];
}

const HOSTILE_CHAT_KEYS = [
  '..',
  '.',
  '%2e%2e',
  '%2E',
  'a%2Fb',
  'a{b}',
  '{c:x}',
  'a b',
  '%00',
  '%F0%9F%98%80',
  'x'.repeat(201),
  'x'.repeat(300),
  '%',
  '%zz',
  '__proto__',
  'constructor',
  'a%0d%0aSet-Cookie:x',
];

const HOSTILE_URLS = [
  'https://[::127.0.0.1]/x.png',
  'https://[64:ff9b::a00:1]/x.png',
  'https://[64:ff9b::a9fe:a9fe]/latest',
  'https://[2002:7f00:1::]/x.png',
  'https://[::ffff:169.254.169.254]/',
  'https://localhost./x.png',
  'https://inside.example/x.png',
  'https://127.1/x.png',
  'https://0x7f000001/x.png',
  'http://example.com/x.png',
  'file:///etc/passwd',
  'gopher://example.com/',
  'https://user:pass@example.com/x.png',
  'data:image/png,hello',
  'data:image/png;base64,abcde',
  'data:text/html;base64,PGI+',
  'javascript:alert(1)',
  'https://',
  '',
];
const GOOD_URLS = ['https://files.example.com/cat.png', 'data:image/png;base64,iVBORw0KGgo='];

function chatKey(f: Fuzz, t: FuzzTargets): string {
  if (f.chance(0.6)) return f.pick(t.chats);
  if (f.chance(0.5)) return f.pick(HOSTILE_CHAT_KEYS);
  return encodeURIComponent(f.text(1 + f.int(20), HOSTILE_CHARS));
}

/** A JSON value of any shape, nested at most `depth` deep. */
export function randomJson(f: Fuzz, depth = 3): unknown {
  switch (depth <= 0 ? f.int(5) : f.int(8)) {
    case 0:
      return null;
    case 1:
      return f.chance(0.5);
    case 2:
      return f.pick([0, -1, 1.5, 1e308, -1e308, 2 ** 53, Number.MAX_SAFE_INTEGER + 2, 1e-300]);
    case 3:
      return f.text(f.int(40), HOSTILE_CHARS);
    case 4:
      return f.chance(0.1) ? 'y'.repeat(5000 + f.int(300_000)) : f.text(1 + f.int(10), 'abc');
    case 5:
    case 6: {
      const o: Record<string, unknown> = {};
      for (let i = f.int(5); i > 0; i--) {
        o[
          f.pick(['text', 'id', 'parts', 'metadata', 'chatKey', '__proto__', 'constructor', f.text(3, 'xyz')])
        ] = randomJson(f, depth - 1);
      }
      return o;
    }
    default:
      return Array.from({ length: f.int(4) }, () => randomJson(f, depth - 1));
  }
}

function part(f: Fuzz, valid: boolean): unknown {
  if (valid) {
    return f.chance(0.7)
      ? { type: 'text', text: f.text(1 + f.int(30), 'hello world ') }
      : { type: 'file', mediaType: 'image/png', url: f.pick(GOOD_URLS) };
  }
  switch (f.int(5)) {
    case 0:
      return {
        type: 'file',
        mediaType: f.pick(['image/png', 'text/html', 'image', '']),
        url: f.pick(HOSTILE_URLS),
      };
    case 1:
      return { type: f.pick(['tool-x', 'reasoning', 'source-url', 'step-start', 'dynamic-tool']), text: 'x' };
    case 2:
      return { type: 'text', text: f.pick([42, null, '', '\ud800', 'x'.repeat(300_000)]) };
    default:
      return randomJson(f, 2);
  }
}

/** A message body for the HTTP API: valid, or valid but for one mutated field. */
function messageBody(f: Fuzz, valid: boolean): Record<string, unknown> {
  const body: Record<string, unknown> = {
    id: `m-${f.int(50)}`,
    text: f.text(1 + f.int(40), 'hello world '),
  };
  if (f.chance(0.3)) body.parts = [part(f, true)];
  if (f.chance(0.3)) body.metadata = { userId: `u${f.int(5)}`, username: f.pick(['ann', 'bob', '@Ann']) };
  if (valid) return body;
  const field = f.pick(['id', 'text', 'parts', 'metadata', 'extra', 'nest']);
  if (field === 'parts') body.parts = Array.from({ length: 1 + f.int(3) }, () => part(f, false));
  else if (field === 'metadata') body.metadata = f.chance(0.5) ? randomJson(f, 3) : { extra: deep(20) };
  else if (field === 'extra') body[f.text(4, 'qrs')] = randomJson(f);
  else if (field === 'nest') body.text = deep(70 + f.int(2000));
  else body[field] = f.chance(0.5) ? randomJson(f, 2) : f.pick(['', '{x}', 'x'.repeat(201), 7]);
  return body;
}

function deep(levels: number): unknown {
  let v: unknown = 1;
  for (let i = 0; i < levels; i++) v = { a: v };
  return v;
}

function uiBody(f: Fuzz, chat: string, valid: boolean): Record<string, unknown> {
  const body: Record<string, unknown> = {
    id: chat,
    messages: [{ id: `u-${f.int(50)}`, role: 'user', parts: [part(f, true)] }],
    trigger: 'submit-message',
    messageId: null,
  };
  if (valid) return body;
  const field = f.pick(['id', 'messages', 'trigger', 'role', 'parts']);
  const first = (body.messages as Array<Record<string, unknown>>)[0]!;
  if (field === 'role') first.role = f.pick(['assistant', 'system', 'tool', 7]);
  else if (field === 'parts') first.parts = [part(f, false)];
  else if (field === 'trigger') body.trigger = f.pick(['regenerate-message', 'resume', '', null]);
  else body[field] = randomJson(f, 2);
  return body;
}

/** The Standard Webhooks signature of `payload`, the way `standardwebhooks` computes it. */
export function signWebhook(secret: string, id: string, timestamp: number, payload: string): string {
  const key = Buffer.from(secret.replace(/^whsec_/, ''), 'base64');
  return `v1,${createHmac('sha256', key).update(`${id}.${timestamp}.${payload}`).digest('base64')}`;
}

function webhookRequest(f: Fuzz, t: FuzzTargets, valid: boolean): FuzzRequest {
  const body: Record<string, unknown> = { chatKey: f.pick(t.chats), text: 'from the crm' };
  if (f.chance(0.3))
    body.replyTo = { url: f.chance(0.5) ? 'https://hooks.example.com/in' : f.pick(HOSTILE_URLS) };
  if (f.chance(0.2)) body.parts = [part(f, valid)];
  if (!valid && f.chance(0.5)) Object.assign(body, messageBody(f, false));
  const payload = valid || f.chance(0.8) ? JSON.stringify(body) : f.text(f.int(60), HOSTILE_CHARS);
  const id = f.chance(0.9) ? `evt_${f.int(40)}` : f.pick(['', 'a b', '{x}', 'x'.repeat(200)]);
  const now = Math.floor(Date.now() / 1000);
  const timestamp = valid || f.chance(0.7) ? now : f.pick([now - 3600, now + 3600, 0, -1]);
  const headers: Record<string, string> = {
    'content-type':
      valid || f.chance(0.7) ? 'application/json' : f.pick(['text/plain', 'application/xml', 'x']),
    'webhook-id': id,
    'webhook-timestamp': String(timestamp),
    'webhook-signature':
      valid || f.chance(0.6)
        ? signWebhook(t.source.secret, id, timestamp, payload)
        : f.pick(['v1,AAAA', '', 'v2,x']),
  };
  if (!valid && f.chance(0.2))
    delete headers[f.pick(['webhook-id', 'webhook-timestamp', 'webhook-signature'])];
  const source = valid || f.chance(0.8) ? t.source.name : f.pick(['nope', 'CRM', '..', '%00']);
  return {
    method: 'POST',
    path: `/webhooks/generic/${source}`,
    headers,
    body: payload,
    intent: valid ? 'valid' : 'hostile',
  };
}

function auth(f: Fuzz, t: FuzzTargets, chat: string, valid: boolean): Record<string, string> {
  if (valid) {
    const browser = t.browserTokens[chat];
    return { authorization: `Bearer ${browser && f.chance(0.5) ? browser : t.apiToken}` };
  }
  const choice = f.int(12);
  if (choice === 0) return {};
  if (choice === 1) return { authorization: `Bearer ${t.apiToken}` };
  if (choice === 2) return { authorization: `Bearer ${f.pick(Object.values(t.browserTokens))}` };
  if (choice === 3) return { authorization: `Bearer ${f.pick(t.badBrowserTokens)}` };
  if (choice === 4)
    return { authorization: f.pick(['Bearer', 'Bearer ', 'Basic Zm9vOmJhcg==', `bearer ${t.apiToken}`]) };
  if (choice === 5) return { authorization: `Bearer ${t.apiToken}x` };
  return { authorization: `Bearer ${t.apiToken}` };
}

const READS = ['outbox', 'events', 'archive', 'messages', 'contexts', 'memory', 'usage'];

/** One random request. */
export function fuzzRequest(f: Fuzz, t: FuzzTargets): FuzzRequest {
  const valid = f.chance(0.15);
  const kind = f.int(20);
  if (kind < 3) return webhookRequest(f, t, valid);
  const chat = valid ? f.pick(t.chats) : chatKey(f, t);
  const headers: Record<string, string> = auth(f, t, chat, valid);
  if (f.chance(0.3))
    headers.origin = f.chance(0.7) ? t.origin : f.pick(['null', 'https://evil.example', '*']);
  const q = encodeURIComponent;
  const json = (body: unknown) => {
    headers['content-type'] =
      valid || f.chance(0.8)
        ? 'application/json'
        : f.pick(['text/plain', 'application/x-www-form-urlencoded', 'multipart/form-data; boundary=x', '']);
    if (!valid && f.chance(0.1))
      return f.pick(['{', '{"text":', '', 'null', '[]', '"x"', '\u0000', '{"text":"\\ud800"}']);
    return JSON.stringify(body);
  };
  const r = (method: string, path: string, body?: string): FuzzRequest => ({
    method: valid || f.chance(0.85) ? method : f.pick(['PUT', 'DELETE', 'PATCH', 'OPTIONS', 'GET', 'POST']),
    path,
    headers,
    ...(body !== undefined && { body }),
    intent: valid ? 'valid' : 'hostile',
  });
  switch (kind) {
    case 3:
    case 4:
    case 5:
      return r('POST', `/v1/chats/${chat}/messages`, json(messageBody(f, valid)));
    case 6:
    case 7: {
      const read = f.pick(READS);
      const query = f.chance(0.6)
        ? `?after=${q(read === 'archive' ? integerText(f) : streamIdText(f))}&limit=${q(integerText(f))}`
        : f.chance(0.5)
          ? `?${f.pick(['from', 'to', 'query', 'bogus'])}=${q(f.text(1 + f.int(12), HOSTILE_CHARS))}`
          : '';
      return r('GET', `/v1/chats/${chat}/${read}${query}`);
    }
    case 8: {
      if (f.chance(0.5)) headers['last-event-id'] = f.chance(0.1) ? MAX_STREAM_CURSOR : streamCursorText(f);
      const query = f.chance(0.3) ? `?lastEventId=${q(streamCursorText(f))}` : '';
      return r('GET', `/v1/chats/${chat}/stream${query}`);
    }
    case 9:
    case 10:
      return r('POST', '/v1/ui', json(uiBody(f, chat, valid)));
    case 11:
      return r(f.pick(['GET', 'GET', 'POST']), `/v1/ui/${chat}/${f.pick(['stream', 'messages', 'stop'])}`);
    case 12: {
      const body = f.pick([
        { content: f.text(f.int(50), HOSTILE_CHARS) },
        { content: 'x'.repeat(50_000) },
        randomJson(f),
      ]);
      return r('PUT', `/v1/chats/${chat}/memory`, json(valid ? { content: 'likes tea' } : body));
    }
    case 13: {
      const body = valid
        ? { action: 'new', title: 'fuzz' }
        : f.pick([{ action: 'load', query: 'x' }, { action: 'nope' }, randomJson(f)]);
      return r('POST', `/v1/chats/${chat}/contexts`, json(body));
    }
    case 14:
      return r('GET', `/v1/contacts?query=${q(f.text(f.int(10), HOSTILE_CHARS))}&limit=${q(integerText(f))}`);
    case 15:
      return r(
        'POST',
        `/webhooks/${f.pick(['telegram', 'slack', 'whatsapp', 'discord', 'teams', 'gchat', 'nope'])}`,
        json(randomJson(f)),
      );
    case 16: {
      const admin = f.chance(0.3)
        ? { authorization: `Basic ${Buffer.from(`${t.admin.user}:${t.admin.password}`).toString('base64')}` }
        : { authorization: `Basic ${Buffer.from(`${t.admin.user}:${f.text(5, 'abc')}`).toString('base64')}` };
      return {
        method: 'GET',
        path: f.pick(['/admin/queues', '/admin/queues/api/queues', '/admin/queues/../../v1']),
        headers: admin,
        intent: 'hostile',
      };
    }
    case 17:
      return r('OPTIONS', f.pick(['/v1/ui', `/v1/chats/${chat}/stream`, '/webhooks/generic/crm']));
    case 18:
      return r(
        f.pick(['GET', 'HEAD']),
        f.pick([
          '/healthz',
          '/readyz',
          '/metrics',
          '/nope',
          `/v1/${'a/'.repeat(f.int(40))}`,
          '/%',
          '/v1/chats/%E0%A4%A/messages',
        ]),
      );
    default:
      return r(f.pick(['GET', 'POST', 'DELETE']), `/v1/chats/${chat}/${f.text(1 + f.int(8), 'abc/%.')}`);
  }
}

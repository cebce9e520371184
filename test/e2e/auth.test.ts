import { describe, expect, it } from 'vitest';
import { mintWebToken } from '../../src/shared/web-token.js';
import { startRole } from '../helpers/processes.js';
import { keysUnder, waitFor } from '../helpers/redis.js';
import { useStack } from '../helpers/stack.js';

/**
 * Secure by default (docs/security.md), with real `chatlane ingress` processes: production
 * refuses an open API, API_AUTH=none opens it on purpose, development warns, and any token set
 * closes every /v1 route, writing nothing for a refused request.
 */

const API_TOKEN = 'an-api-token-of-at-least-32-characters';
const SECRET = 'a-web-token-secret-of-at-least-32-characters';
const METRICS_TOKEN = 'a-metrics-token-of-at-least-32-chars';

const warnings = (logs: Array<Record<string, unknown>>) => logs.filter((l) => Number(l.level) === 40);

/** Why a process refused to start; one that starts after all is killed and reported as started. */
async function refusal(role: 'ingress' | 'all', env: Record<string, string>): Promise<string> {
  return startRole(role, env).then(
    async (proc) => {
      await proc.kill('SIGKILL');
      return 'started';
    },
    (err: Error) => err.message,
  );
}

describe('an ingress process and its API token', () => {
  const stack = useStack('e2e-auth', { roles: [] });

  it('with NODE_ENV=production and no token refuses to start: exit 2, naming API_TOKEN and API_AUTH=none', async () => {
    for (const role of ['ingress', 'all'] as const) {
      expect(await refusal(role, { ...stack.env, NODE_ENV: 'production' }), role).toMatch(
        /exited with 2 before it was ready: chatlane: invalid configuration:\n {2}API_TOKEN: required with NODE_ENV=production: .*API_AUTH=none/,
      );
    }
    // It stopped before it connected: nothing of it in Redis.
    expect(await keysUnder(stack.redis, stack.prefix)).toEqual([]);
  });

  it('refuses a short API_TOKEN, and API_AUTH=none together with a token, naming the variable', async () => {
    expect(await refusal('ingress', { ...stack.env, API_TOKEN: 'abc' })).toMatch(
      /exited with 2 before it was ready: chatlane: invalid configuration:\n {2}API_TOKEN: must be at least 32 characters/,
    );
    expect(await refusal('ingress', { ...stack.env, API_AUTH: 'none', API_TOKEN })).toMatch(
      /exited with 2 before it was ready: chatlane: invalid configuration:\n {2}API_AUTH: none opens \/v1 to everyone, but API_TOKEN is set/,
    );
  });

  it('with API_AUTH=none starts open in production, with a warning at start', async () => {
    const ingress = await stack.start('ingress', { NODE_ENV: 'production', API_AUTH: 'none' });
    expect(warnings(ingress.logs).map((l) => l.msg)).toContainEqual(
      expect.stringMatching(/^API_AUTH=none: \/v1 is open to anyone/),
    );
    const res = await fetch(`${ingress.url}/v1/chats/open-chat/messages`, {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify({ text: 'hi' }),
    });
    expect(res.status).toBe(202);
    await ingress.kill();
  });

  it('in development without a token starts open, with one warning line', async () => {
    // NODE_ENV '' is unset, as on a developer's shell.
    const ingress = await stack.start('ingress', { NODE_ENV: '' });
    const open = warnings(ingress.logs).filter((l) => String(l.msg).includes('/v1 is open'));
    expect(open).toHaveLength(1);
    expect(String(open[0]!.msg)).toMatch(/^no API_TOKEN: [^\n]*NODE_ENV=production[^\n]*$/);
    await ingress.kill();
  });

  it('with WEB_TOKEN_SECRET alone, anonymous /v1/chats/* and /v1/ui get 401 and nothing is written', async () => {
    const ingress = await stack.start('ingress', { NODE_ENV: 'production', WEB_TOKEN_SECRET: SECRET });
    await waitFor(async () => (await stack.redis.exists(`${stack.prefix}:{q:turns}:turns:meta`)) === 1, {
      what: 'the queue meta',
    });
    const before = (await keysUnder(stack.redis, stack.prefix)).sort();
    const json = { 'content-type': 'application/json' };
    const refused: Array<[string, RequestInit]> = [
      ['/v1/chats/anon/messages', { method: 'POST', headers: json, body: JSON.stringify({ text: 'hi' }) }],
      ['/v1/chats/anon/messages', {}],
      ['/v1/chats/anon/outbox', {}],
      ['/v1/chats/anon/stream', {}],
      [
        '/v1/ui',
        {
          method: 'POST',
          headers: json,
          body: JSON.stringify({
            id: 'anon',
            trigger: 'submit-message',
            messages: [{ id: 'm1', role: 'user', parts: [{ type: 'text', text: 'hi' }] }],
          }),
        },
      ],
      ['/v1/ui/anon/messages', {}],
      ['/v1/ui/anon/stop', { method: 'POST' }],
    ];
    for (const [path, init] of refused) {
      const res = await fetch(`${ingress.url}${path}`, init);
      expect(res.status, `${init.method ?? 'GET'} ${path}`).toBe(401);
      expect(((await res.json()) as { error: { code: string } }).error.code).toBe('UNAUTHORIZED');
    }
    expect((await keysUnder(stack.redis, stack.prefix)).sort()).toEqual(before);
    // The browser token still opens its own chat.
    const own = await fetch(`${ingress.url}/v1/ui/anon/messages`, {
      headers: { authorization: `Bearer ${await mintWebToken(SECRET, 'anon')}` },
    });
    expect(own.status).toBe(200);
    await ingress.kill();
  });

  it('with auth on, /metrics answers METRICS_TOKEN only, and says how at start when it is unset', async () => {
    const without = await stack.start('ingress', { API_TOKEN });
    expect(warnings(without.logs).map((l) => l.msg)).toContainEqual(
      expect.stringContaining('set METRICS_TOKEN'),
    );
    const bearer = (token: string) => ({ headers: { authorization: `Bearer ${token}` } });
    expect((await fetch(`${without.url}/metrics`, bearer(API_TOKEN))).status).toBe(401);
    await without.kill();
    const withToken = await stack.start('ingress', { API_TOKEN, METRICS_TOKEN });
    expect((await fetch(`${withToken.url}/metrics`, bearer(API_TOKEN))).status).toBe(401);
    expect((await fetch(`${withToken.url}/metrics`, bearer(METRICS_TOKEN))).status).toBe(200);
    expect((await fetch(`${withToken.url}/healthz`)).status).toBe(200);
    expect((await fetch(`${withToken.url}/readyz`)).status).toBe(200);
    await withToken.kill();
  });
});

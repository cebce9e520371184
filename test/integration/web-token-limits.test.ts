import { SignJWT } from 'jose';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { waitReady } from '../../src/shared/redis.js';
import { mintWebToken } from '../../src/shared/web-token.js';
import { type TestIngress, testIngress } from '../helpers/ingress.js';
import { deletePrefix, randomPrefix, testRedis } from '../helpers/redis.js';

/**
 * What a browser token must satisfy beyond its signature (docs/security.md, "Limits"): a life
 * no longer than WEB_TOKEN_MAX_TTL_S, and the aud and iss the ingress is configured with.
 */

const SECRET = 'a-web-token-secret-of-at-least-32-characters';
const redis = testRedis('ingress');
const prefix = randomPrefix('webttl');
const now = () => Math.floor(Date.now() / 1000);
let plain: TestIngress;
let claimed: TestIngress;

beforeAll(async () => {
  await waitReady(redis);
  plain = await testIngress(redis, prefix, { web: { tokenSecret: SECRET, tokenRules: { maxTtlS: 3600 } } });
  claimed = await testIngress(redis, prefix, {
    web: {
      tokenSecret: SECRET,
      tokenRules: { maxTtlS: 3600, audience: 'chat.example.com', issuer: 'https://app.example.com' },
    },
  });
});
afterAll(async () => {
  await plain.close();
  await claimed.close();
  await deletePrefix(redis, prefix);
  redis.disconnect();
});

function sign(claims: { iat?: number; exp: number; aud?: string; iss?: string }): Promise<string> {
  const jwt = new SignJWT({})
    .setProtectedHeader({ alg: 'HS256' })
    .setSubject('web-a')
    .setExpirationTime(claims.exp);
  if (claims.iat !== undefined) jwt.setIssuedAt(claims.iat);
  if (claims.aud !== undefined) jwt.setAudience(claims.aud);
  if (claims.iss !== undefined) jwt.setIssuer(claims.iss);
  return jwt.sign(new TextEncoder().encode(SECRET));
}

const read = (ing: TestIngress, token: string) =>
  ing.app.inject({
    method: 'GET',
    url: '/v1/ui/web-a/messages',
    headers: { authorization: `Bearer ${token}` },
  });

describe('a browser token may not outlive WEB_TOKEN_MAX_TTL_S', () => {
  it('exp - iat over the maximum is refused with 401, even while the token is young', async () => {
    const res = await read(plain, await sign({ iat: now(), exp: now() + 3601 }));
    expect(res.statusCode).toBe(401);
    expect(res.json().error).toMatchObject({
      code: 'UNAUTHORIZED',
      message: expect.stringContaining('exp - iat'),
    });
  });

  it('without iat, exp - now over the maximum is refused (a token valid for 100 years)', async () => {
    const res = await read(plain, await sign({ exp: now() + 100 * 365 * 86_400 }));
    expect(res.statusCode).toBe(401);
    expect(res.json().error.message).toContain('exp - now');
  });

  it('a token within the maximum opens its chat, with or without iat', async () => {
    expect((await read(plain, await sign({ iat: now(), exp: now() + 3600 }))).statusCode).toBe(200);
    expect((await read(plain, await sign({ exp: now() + 3000 }))).statusCode).toBe(200);
    expect((await read(plain, await mintWebToken(SECRET, 'web-a', 3600))).statusCode).toBe(200);
  });
});

describe('WEB_TOKEN_AUDIENCE and WEB_TOKEN_ISSUER', () => {
  const exp = () => now() + 600;

  it('when set, a token without them or with others is refused with 401', async () => {
    for (const claims of [
      {},
      { aud: 'chat.example.com' },
      { iss: 'https://app.example.com' },
      { aud: 'other.example.com', iss: 'https://app.example.com' },
      { aud: 'chat.example.com', iss: 'https://evil.example.com' },
    ]) {
      const res = await read(claimed, await sign({ exp: exp(), ...claims }));
      expect(res.statusCode, JSON.stringify(claims)).toBe(401);
      expect(res.json().error.code).toBe('UNAUTHORIZED');
    }
  });

  it('a token carrying both opens its chat; mintWebToken sets them', async () => {
    const both = { aud: 'chat.example.com', iss: 'https://app.example.com' };
    expect((await read(claimed, await sign({ exp: exp(), ...both }))).statusCode).toBe(200);
    const minted = await mintWebToken(SECRET, 'web-a', 600, {
      audience: 'chat.example.com',
      issuer: 'https://app.example.com',
    });
    expect((await read(claimed, minted)).statusCode).toBe(200);
  });

  it('unset, they are not asked for', async () => {
    expect((await read(plain, await sign({ exp: exp(), aud: 'anything' }))).statusCode).toBe(200);
  });
});

import { describe, expect, it } from 'vitest';
import { apiAccessOf } from '../../src/ingress/api-access.js';
import { loadConfig } from '../../src/shared/config.js';
import { configErrorOf } from '../helpers/config-error.js';

/**
 * The access rules' configuration (docs/security.md): the length floors of the secrets, the
 * browser-token limits, TRUST_PROXY, and the one rule of whether /v1 is open.
 */

const API_TOKEN = 'a'.repeat(32);
const SECRET = 'w'.repeat(32);

describe('the secrets have a floor, and a shorter one is a ConfigError naming the variable', () => {
  it.each([
    ['API_TOKEN', 32],
    ['METRICS_TOKEN', 32],
    ['WEB_TOKEN_SECRET', 32],
    ['ADMIN_PASSWORD', 12],
  ])('%s needs at least %i characters', (name, min) => {
    const err = configErrorOf(() => loadConfig({ [name]: 'x'.repeat(min - 1) }));
    expect(err.message).toMatch(new RegExp(`^ {2}${name}: must be at least ${min} characters$`, 'm'));
    expect((loadConfig({ [name]: 'x'.repeat(min) }) as unknown as Record<string, unknown>)[name]).toBe(
      'x'.repeat(min),
    );
  });

  it('a blank secret is unset, as every blank variable', () => {
    expect(loadConfig({ API_TOKEN: '  ', ADMIN_PASSWORD: '' }).API_TOKEN).toBeUndefined();
  });
});

describe('browser token limits and the proxy setting', () => {
  it('default to a day, no aud or iss, no trusted proxy and 20 failures a minute', () => {
    const config = loadConfig({});
    expect(config).toMatchObject({
      WEB_TOKEN_MAX_TTL_S: 86_400,
      TRUST_PROXY: false,
      AUTH_FAILURE_LIMIT: 20,
      AUTH_FAILURE_WINDOW_MS: 60_000,
    });
    for (const unset of [
      'WEB_TOKEN_AUDIENCE',
      'WEB_TOKEN_ISSUER',
      'API_AUTH',
      'NODE_ENV',
      'METRICS_TOKEN',
    ] as const)
      expect(config[unset], unset).toBeUndefined();
  });

  it('TRUST_PROXY takes true, a hop count or the proxies’ addresses and ranges', () => {
    expect(loadConfig({ TRUST_PROXY: 'true' }).TRUST_PROXY).toBe(true);
    expect(loadConfig({ TRUST_PROXY: 'false' }).TRUST_PROXY).toBe(false);
    expect(loadConfig({ TRUST_PROXY: '2' }).TRUST_PROXY).toBe(2);
    expect(loadConfig({ TRUST_PROXY: '10.0.0.0/8, 127.0.0.1,::1' }).TRUST_PROXY).toEqual([
      '10.0.0.0/8',
      '127.0.0.1',
      '::1',
    ]);
    for (const bad of ['proxy.internal', '0', '10.0.0.0/99']) {
      const err = configErrorOf(() => loadConfig({ TRUST_PROXY: bad }));
      expect(err.message).toMatch(/^ {2}TRUST_PROXY: /m);
    }
  });

  it('API_AUTH takes token or none only', () => {
    expect(loadConfig({ API_AUTH: 'none' }).API_AUTH).toBe('none');
    expect(configErrorOf(() => loadConfig({ API_AUTH: 'off' })).message).toMatch(/^ {2}API_AUTH: /m);
  });
});

describe('whether /v1 is open (apiAccessOf)', () => {
  const access = (env: Record<string, string>) => apiAccessOf(loadConfig(env));

  it('a token set means /v1 needs one, in any environment', () => {
    expect(access({ API_TOKEN })).toEqual({ open: false });
    expect(access({ WEB_TOKEN_SECRET: SECRET, NODE_ENV: 'production' })).toEqual({ open: false });
    expect(access({ API_TOKEN, API_AUTH: 'token', NODE_ENV: 'production' })).toEqual({ open: false });
  });

  it('production without a token is refused, naming API_TOKEN and the opt-out API_AUTH=none', () => {
    const err = configErrorOf(() => access({ NODE_ENV: 'production' }));
    expect(err.message).toMatch(/^ {2}API_TOKEN: required with NODE_ENV=production/m);
    expect(err.message).toContain('API_AUTH=none');
  });

  it('API_AUTH=token without a token is refused in development too', () => {
    const err = configErrorOf(() => access({ API_AUTH: 'token' }));
    expect(err.message).toMatch(/^ {2}API_TOKEN: required with API_AUTH=token/m);
  });

  it('API_AUTH=none opens /v1 on purpose, with a warning, in production too', () => {
    const open = access({ API_AUTH: 'none', NODE_ENV: 'production' });
    expect(open).toMatchObject({ open: true });
    expect(open.open && open.warning).toMatch(/^API_AUTH=none: \/v1 is open/);
  });

  it('API_AUTH=none together with a token is a contradiction, refused naming both', () => {
    const err = configErrorOf(() => access({ API_AUTH: 'none', API_TOKEN }));
    expect(err.message).toMatch(/^ {2}API_AUTH: none opens \/v1 to everyone, but API_TOKEN is set/m);
    const both = configErrorOf(() => access({ API_AUTH: 'none', API_TOKEN, WEB_TOKEN_SECRET: SECRET }));
    expect(both.message).toContain('API_TOKEN and WEB_TOKEN_SECRET are set');
  });

  it('development without a token is open, with a one-line warning', () => {
    for (const NODE_ENV of [undefined, 'development', 'test']) {
      const open = access(NODE_ENV ? { NODE_ENV } : {});
      expect(open.open).toBe(true);
      expect(open.open && open.warning).toMatch(/^no API_TOKEN: \/v1 is open[^\n]*$/);
    }
  });
});

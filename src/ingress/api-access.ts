import { type Config, ConfigError } from '../shared/config.js';

/** Whether /v1 asks for a token, and what an open one logs at start. */
export type ApiAccess = { open: false } | { open: true; warning: string };

/**
 * The one rule of the ingress's access (docs/security.md), decided before anything binds:
 * - API_TOKEN or WEB_TOKEN_SECRET set: /v1 needs a valid token on every route;
 * - neither set: refused (ConfigError) with NODE_ENV=production or API_AUTH=token; open with a
 *   warning otherwise (development), and on purpose with API_AUTH=none;
 * - API_AUTH=none together with a token contradicts itself: refused, naming both.
 */
export function apiAccessOf(
  config: Pick<Config, 'API_AUTH' | 'API_TOKEN' | 'WEB_TOKEN_SECRET' | 'NODE_ENV'>,
): ApiAccess {
  const tokens = [
    config.API_TOKEN !== undefined && 'API_TOKEN',
    config.WEB_TOKEN_SECRET !== undefined && 'WEB_TOKEN_SECRET',
  ].filter((name): name is string => name !== false);
  if (config.API_AUTH === 'none') {
    if (tokens.length > 0) {
      const named = tokens.join(' and ');
      throw new ConfigError(
        `invalid configuration:\n  API_AUTH: none opens /v1 to everyone, but ${named} ${tokens.length > 1 ? 'are' : 'is'} set: unset API_AUTH to require tokens, or unset ${named} to run open`,
      );
    }
    return {
      open: true,
      warning:
        'API_AUTH=none: /v1 is open to anyone who can reach this port; keep the port on a private network, or set API_TOKEN',
    };
  }
  if (tokens.length > 0) return { open: false };
  if (config.API_AUTH === 'token' || config.NODE_ENV === 'production') {
    const why = config.API_AUTH === 'token' ? 'API_AUTH=token' : 'NODE_ENV=production';
    throw new ConfigError(
      `invalid configuration:\n  API_TOKEN: required with ${why}: set API_TOKEN (at least 32 characters, e.g. openssl rand -hex 32), or API_AUTH=none to serve /v1 without authentication on purpose`,
    );
  }
  return {
    open: true,
    warning:
      'no API_TOKEN: /v1 is open to anyone who can reach this port (development: with NODE_ENV=production the ingress refuses to start like this)',
  };
}

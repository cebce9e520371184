import { hostProblem } from '../address-policy.js';

/**
 * Where generic webhook replies may go (`replyTo.url`). A reply URL is chosen by whoever
 * can sign a webhook for the source, so it is a server-side request forgery vector. The policy:
 * - https only, unless GENERIC_WEBHOOK_REPLY_ALLOW_HTTP (development);
 * - with GENERIC_WEBHOOK_REPLY_HOSTS set, only those hosts (exact or `*.domain`); the
 *   operator vouches for them, so they may be private addresses;
 * - any other host must be public by the one address policy (`../address-policy.ts`): an IP
 *   literal or `localhost` name here, a name by what it resolves to at ingest
 *   (`resolvedHostProblem`) and again on the address the connection uses (`guardedLookup`);
 * - no redirects are followed.
 * Checked at ingest (400, nothing stored) and again before every send (config may change).
 */
export interface ReplyUrlPolicy {
  allowHttp: boolean;
  /** Lowercase host patterns; empty = any public host. */
  hosts: readonly string[];
}

export function hostMatches(host: string, pattern: string): boolean {
  if (pattern.startsWith('*.')) return host.endsWith(pattern.slice(1)) && host.length > pattern.length - 1;
  return host === pattern;
}

/** The URL's host as matched against the allowlist: lowercase, IPv6 in brackets. */
function hostOf(url: URL): string {
  return url.hostname.toLowerCase();
}

/** Whether the host is on the operator's allowlist (then private addresses are fine). */
export function isListedHost(url: URL, policy: ReplyUrlPolicy): boolean {
  const host = hostOf(url);
  return policy.hosts.some((p) => hostMatches(host, p));
}

/**
 * The checks that need no DNS; returns why the URL is refused, or undefined. A URL that passes
 * and is not on the allowlist still has its host name resolved (`resolvedHostProblem`).
 */
export function replyUrlProblem(raw: string, policy: ReplyUrlPolicy): string | undefined {
  let url: URL;
  try {
    url = new URL(raw);
  } catch {
    return 'not a URL';
  }
  if (url.protocol !== 'https:' && !(url.protocol === 'http:' && policy.allowHttp)) {
    return policy.allowHttp
      ? 'must be http: or https:'
      : 'must be https: (GENERIC_WEBHOOK_REPLY_ALLOW_HTTP allows http:)';
  }
  if (policy.hosts.length > 0) {
    return isListedHost(url, policy)
      ? undefined
      : `host ${hostOf(url)} is not in GENERIC_WEBHOOK_REPLY_HOSTS`;
  }
  return hostProblem(url.hostname);
}

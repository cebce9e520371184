import { lookup as dnsLookup, type LookupAddress, type LookupOptions } from 'node:dns';
import { BlockList, isIP } from 'node:net';

/**
 * Where generic webhook replies may go (`replyTo.url`). A reply URL is chosen by whoever
 * can sign a webhook for the source, so it is a server-side request forgery vector: left
 * open, a caller could make chatlane POST to cloud metadata (169.254.169.254), Redis or an
 * admin port on the private network. The policy:
 * - https only, unless GENERIC_WEBHOOK_REPLY_ALLOW_HTTP (development);
 * - with GENERIC_WEBHOOK_REPLY_HOSTS set, only those hosts (exact or `*.domain`); the
 *   operator vouches for them, so they may be private addresses;
 * - any other host must resolve to public addresses only, checked on the address the
 *   connection actually uses (`guardedLookup`), so DNS rebinding cannot slip past it;
 * - no redirects are followed.
 * Checked at ingest (400, nothing stored) and again before every send (config may change).
 */
export interface ReplyUrlPolicy {
  allowHttp: boolean;
  /** Lowercase host patterns; empty = any public host. */
  hosts: readonly string[];
}

const PRIVATE = new BlockList();
for (const [net, bits] of [
  ['0.0.0.0', 8],
  ['10.0.0.0', 8],
  ['100.64.0.0', 10],
  ['127.0.0.0', 8],
  ['169.254.0.0', 16],
  ['172.16.0.0', 12],
  ['192.0.0.0', 24],
  ['192.168.0.0', 16],
  ['198.18.0.0', 15],
  ['224.0.0.0', 3],
] as const) {
  PRIVATE.addSubnet(net, bits, 'ipv4');
}
for (const [net, bits] of [
  ['::', 127],
  ['fc00::', 7],
  ['fe80::', 10],
  ['ff00::', 8],
] as const) {
  PRIVATE.addSubnet(net, bits, 'ipv6');
}

/** Loopback, private, link-local, carrier-grade NAT, multicast and reserved addresses. */
export function isPrivateAddress(address: string): boolean {
  const family = isIP(address);
  if (family === 4) return PRIVATE.check(address, 'ipv4');
  if (family !== 6) return false;
  const mapped = /^::ffff:(\d+\.\d+\.\d+\.\d+)$/i.exec(address);
  if (mapped) return PRIVATE.check(mapped[1]!, 'ipv4');
  return PRIVATE.check(address, 'ipv6');
}

/** `pattern` is a host name, or `*.` + a domain matching its subdomains (not the domain itself). */
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

/** The checks that need no DNS; returns why the URL is refused, or undefined. */
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
  const literal = url.hostname.replace(/^\[|\]$/g, '');
  if (isIP(literal) && isPrivateAddress(literal)) return `${literal} is a private address`;
  if (hostOf(url) === 'localhost' || hostOf(url).endsWith('.localhost'))
    return 'localhost is a private address';
  return undefined;
}

type LookupCallback = (
  err: NodeJS.ErrnoException | null,
  address: string | LookupAddress[],
  family?: number,
) => void;

/** How host names are resolved: `dns.lookup` with `all: true` (tests pass their own). */
export type ResolveAll = (
  hostname: string,
  options: LookupOptions,
  callback: (err: NodeJS.ErrnoException | null, addresses: LookupAddress[]) => void,
) => void;

const systemResolve: ResolveAll = (hostname, options, callback) =>
  dnsLookup(hostname, { ...options, all: true }, callback);

/**
 * A `lookup` for http(s).request that refuses hosts resolving to any private address (or
 * any address `blocked` refuses): the check runs on the addresses the socket will connect
 * to, after DNS, so a public-looking name pointing at 127.0.0.1 is caught.
 */
export function guardLookup(resolve: ResolveAll = systemResolve, blocked = isPrivateAddress) {
  return (hostname: string, options: LookupOptions, callback: LookupCallback): void => {
    resolve(hostname, { ...options, all: true }, (err, addresses) => {
      if (err) return callback(err, []);
      const bad = addresses.find((a) => blocked(a.address));
      if (bad || addresses.length === 0) {
        const refused: NodeJS.ErrnoException = new Error(
          `${hostname} resolves to a private address (${bad?.address ?? 'none'})`,
        );
        refused.code = 'EPRIVATEADDRESS';
        return callback(refused, []);
      }
      if (options.all) return callback(null, addresses);
      const first = addresses[0]!;
      return callback(null, first.address, first.family);
    });
  };
}

/** `guardLookup` over the system resolver. */
export const guardedLookup = guardLookup();

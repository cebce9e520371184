import { lookup as dnsLookup, type LookupAddress, type LookupOptions } from 'node:dns';
import { isIP } from 'node:net';
import ipaddr from 'ipaddr.js';

/**
 * The one address policy for every outbound URL a user can name (a generic webhook's
 * `replyTo.url`, a file part's URL): chatlane connects only to public unicast addresses.
 * Such a URL is a server-side request forgery vector — left open, a sender could make chatlane
 * reach cloud metadata (169.254.169.254), Redis, or an admin port inside the network.
 *
 * Refused: every IPv4 range that is not public unicast (private, loopback, link-local,
 * carrier-grade NAT, unspecified, broadcast, multicast, reserved and documentation ranges);
 * IPv6 outside global unicast 2000::/3 (loopback, unspecified, IPv4-compatible ::/96, ULA
 * fc00::/7, link-local, site-local, multicast, discard), the special ranges inside it
 * (documentation, benchmarking, ORCHID, …) and the local-use NAT64 prefix 64:ff9b:1::/48. An
 * IPv6 address that carries an IPv4 address — IPv4-mapped ::ffff:0:0/96, IPv4-translated,
 * NAT64 64:ff9b::/96, 6to4 2002::/16, Teredo 2001::/32 (server and client) — is judged by that
 * IPv4 address too: 64:ff9b::a9fe:a9fe is the metadata address through a NAT64 gateway.
 * Ranges come from `ipaddr.js`; names are judged by what they resolve to.
 *
 * Used twice: at ingest (`hostProblem`, `resolvedHostProblem`: 400, nothing stored) and at
 * connect time (`guardLookup`: on the very addresses the socket uses, so DNS rebinding between
 * the two has no gap).
 */

/** Why an IPv4 address is not a public destination (its range), or undefined when it is. */
function ipv4Range(ip: ipaddr.IPv4): string | undefined {
  const range = ip.range();
  return range === 'unicast' ? undefined : range;
}

function embeddedIpv4(high: number, low: number): ipaddr.IPv4 {
  return new ipaddr.IPv4([high >> 8, high & 0xff, low >> 8, low & 0xff]);
}

/** The IPv4 addresses an IPv6 address carries, by the range that defines where. */
function carriedIpv4(ip: ipaddr.IPv6, range: string): ipaddr.IPv4[] {
  const p = ip.parts;
  switch (range) {
    case 'ipv4Mapped':
    case 'rfc6145':
    case 'rfc6052':
      return [embeddedIpv4(p[6]!, p[7]!)];
    case '6to4':
      return [embeddedIpv4(p[1]!, p[2]!)];
    case 'teredo':
      // The server, and the client's public address (stored inverted).
      return [embeddedIpv4(p[2]!, p[3]!), embeddedIpv4(~p[6]! & 0xffff, ~p[7]! & 0xffff)];
    default:
      return [];
  }
}

function ipv6Problem(ip: ipaddr.IPv6): string | undefined {
  const range = ip.range() as string;
  const p = ip.parts;
  // RFC 8215's local-use prefix: translated by the operator's own gateway, never global.
  if (range === 'rfc6052' && p[2] !== 0) return 'local-use NAT64, 64:ff9b:1::/48';
  const carried = carriedIpv4(ip, range);
  if (carried.length > 0) {
    for (const v4 of carried) {
      const inner = ipv4Range(v4);
      if (inner) return `${range} carrying ${v4.toString()}, ${inner}`;
    }
    return undefined;
  }
  if (range !== 'unicast') return range;
  if (p.slice(0, 6).every((part) => part === 0)) return 'IPv4-compatible, ::/96';
  // ipaddr.js names special ranges; what it leaves as "unicast" outside 2000::/3 is unassigned.
  return (p[0]! & 0xe000) === 0x2000 ? undefined : 'not global unicast, outside 2000::/3';
}

/**
 * An IPv6 address with its dotted IPv4 tail written as two hex groups. ipaddr.js reads any
 * dotted tail as IPv4-mapped (`::127.0.0.1` as `::ffff:7f00:1`), which would judge the
 * IPv4-compatible form by its IPv4 address; written in hex it is parsed as what it is.
 */
function hexTail(address: string): string {
  return address.replace(/(\d+)\.(\d+)\.(\d+)\.(\d+)(%.*)?$/, (_all, a, b, c, d, zone = '') => {
    const group = (x: string, y: string) => ((Number(x) << 8) | Number(y)).toString(16);
    return `${group(a, b)}:${group(c, d)}${zone}`;
  });
}

/**
 * Why `address` (an IP address as text) is not a public destination, or undefined when it is.
 * Anything that is not an address `ipaddr.js` can read is refused.
 */
export function addressProblem(address: string): string | undefined {
  let ip: ipaddr.IPv4 | ipaddr.IPv6;
  try {
    const family = isIP(address);
    if (family === 0) return `${address} is not an IP address`;
    ip = family === 4 ? ipaddr.IPv4.parse(address) : ipaddr.IPv6.parse(hexTail(address));
  } catch {
    return `${address} is not an IP address`;
  }
  const why = ip.kind() === 'ipv4' ? ipv4Range(ip as ipaddr.IPv4) : ipv6Problem(ip as ipaddr.IPv6);
  return why && `${address} is not a public address (${why})`;
}

export function isPublicAddress(address: string): boolean {
  return addressProblem(address) === undefined;
}

/** A URL's host as a connection would use it: lowercase, IPv6 without brackets. */
function bareHost(hostname: string): string {
  return hostname.toLowerCase().replace(/^\[|\]$/g, '');
}

/**
 * Why a URL's host is refused without asking DNS: an IP literal that is not public, or a
 * `localhost` name (with or without trailing dots: `localhost.` is the same host). Undefined
 * for any other name — `resolvedHostProblem` judges names.
 */
export function hostProblem(hostname: string): string | undefined {
  const host = bareHost(hostname);
  if (isIP(host)) return addressProblem(host);
  const name = host.replace(/\.+$/, '');
  if (name === '') return 'the URL has no host';
  if (name === 'localhost' || name.endsWith('.localhost')) return `${host} is a loopback name`;
  return undefined;
}

/** How host names are resolved: `dns.lookup` with `all: true` (tests pass their own). */
export type ResolveAll = (
  hostname: string,
  options: LookupOptions,
  callback: (err: NodeJS.ErrnoException | null, addresses: LookupAddress[]) => void,
) => void;

export const systemResolve: ResolveAll = (hostname, options, callback) =>
  dnsLookup(hostname, { ...options, all: true }, callback);

/** The longest an ingest waits for DNS before leaving the name to the connect-time check. */
export const INGEST_RESOLVE_TIMEOUT_MS = 2000;

/**
 * `hostProblem`, and for a name also what it resolves to now: any address that is not public
 * refuses it. A name that does not resolve (or not within `timeoutMs`) is not refused here —
 * nothing can be reached through it now, and the connection is judged again (`guardLookup`).
 */
export async function resolvedHostProblem(
  hostname: string,
  resolve: ResolveAll = systemResolve,
  timeoutMs = INGEST_RESOLVE_TIMEOUT_MS,
): Promise<string | undefined> {
  const direct = hostProblem(hostname);
  const host = bareHost(hostname);
  if (direct || isIP(host)) return direct;
  const addresses = await new Promise<LookupAddress[]>((done) => {
    const timer = setTimeout(() => done([]), timeoutMs);
    resolve(host, { all: true }, (err, found) => {
      clearTimeout(timer);
      done(err ? [] : found);
    });
  });
  for (const { address } of addresses) {
    const problem = addressProblem(address);
    if (problem) return `${host} resolves to ${problem}`;
  }
  return undefined;
}

type LookupCallback = (
  err: NodeJS.ErrnoException | null,
  address: string | LookupAddress[],
  family?: number,
) => void;

/** A refused connection's error: `code` EPRIVATEADDRESS, so callers can tell it from a network error. */
function refusedLookup(message: string): NodeJS.ErrnoException {
  const refused: NodeJS.ErrnoException = new Error(message);
  refused.code = 'EPRIVATEADDRESS';
  return refused;
}

/**
 * A `lookup` for http(s).request that refuses a host resolving to any address that is not
 * public (or any address `blocked` refuses): the check runs on the addresses the socket will
 * connect to, after DNS, so a public-looking name pointing at 127.0.0.1 is caught. IP literals
 * never reach a `lookup`: callers judge them with `hostProblem` first.
 */
export function guardLookup(resolve: ResolveAll = systemResolve, blocked = addressProblem) {
  return (hostname: string, options: LookupOptions, callback: LookupCallback): void => {
    const named = hostProblem(hostname);
    if (named) {
      callback(refusedLookup(named), []);
      return;
    }
    resolve(hostname, { ...options, all: true }, (err, addresses) => {
      if (err) return callback(err, []);
      if (addresses.length === 0) return callback(refusedLookup(`${hostname} resolves to no address`), []);
      for (const { address } of addresses) {
        const problem = blocked(address);
        if (problem) return callback(refusedLookup(`${hostname} resolves to ${problem}`), []);
      }
      if (options.all) return callback(null, addresses);
      const first = addresses[0]!;
      return callback(null, first.address, first.family);
    });
  };
}

/** `guardLookup` over the system resolver. */
export const guardedLookup = guardLookup();

import type { LookupAddress } from 'node:dns';
import { describe, expect, it } from 'vitest';
import {
  addressProblem,
  guardLookup,
  hostProblem,
  isPublicAddress,
  type ResolveAll,
  resolvedHostProblem,
} from '../../src/shared/address-policy.js';

/**
 * The one address policy for outbound URLs a user names: which addresses are public, judged
 * by ipaddr.js's ranges and, for IPv6 forms that carry an IPv4 address, by that address too.
 */

/** [address, refused because (a word of the reason), or 'public']. */
const TABLE: Array<[string, string]> = [
  // IPv4: every special range, and public neighbours at their edges.
  ['0.0.0.0', 'unspecified'],
  ['0.1.2.3', 'unspecified'],
  ['10.0.0.1', 'private'],
  ['10.255.255.255', 'private'],
  ['100.64.0.1', 'carrierGradeNat'],
  ['100.127.255.254', 'carrierGradeNat'],
  ['127.0.0.1', 'loopback'],
  ['127.255.255.254', 'loopback'],
  ['169.254.169.254', 'linkLocal'],
  ['169.254.0.1', 'linkLocal'],
  ['172.16.0.1', 'private'],
  ['172.31.255.255', 'private'],
  ['192.168.1.1', 'private'],
  ['192.0.0.8', 'reserved'],
  ['192.0.2.1', 'reserved'],
  ['192.88.99.1', 'reserved'],
  ['198.18.0.1', 'reserved'],
  ['198.51.100.7', 'reserved'],
  ['203.0.113.9', 'reserved'],
  ['224.0.0.1', 'multicast'],
  ['239.255.255.250', 'multicast'],
  ['240.0.0.1', 'reserved'],
  ['255.255.255.255', 'broadcast'],
  ['1.1.1.1', 'public'],
  ['8.8.8.8', 'public'],
  ['93.184.216.34', 'public'],
  ['11.0.0.1', 'public'],
  ['100.63.255.255', 'public'],
  ['100.128.0.1', 'public'],
  ['169.253.255.255', 'public'],
  ['172.15.255.255', 'public'],
  ['172.32.0.1', 'public'],
  ['192.169.0.1', 'public'],
  // IPv6 outside global unicast, and the special ranges.
  ['::', 'unspecified'],
  ['::1', 'loopback'],
  ['fc00::1', 'uniqueLocal'],
  ['fd12:3456:789a::1', 'uniqueLocal'],
  ['fe80::1', 'linkLocal'],
  ['fe80::1%eth0', 'linkLocal'],
  ['fec0::1', 'deprecatedSiteLocal'],
  ['ff02::1', 'multicast'],
  ['ff05::1:3', 'multicast'],
  ['100::1', 'discard'],
  ['2001:db8::1', 'reserved'],
  ['3fff::1', 'reserved'],
  ['2001:2::1', 'benchmarking'],
  ['2001:20::1', 'orchid2'],
  ['5f00::1', 'segmentRouting'],
  ['4000::1', 'outside 2000::/3'],
  ['e000::1', 'outside 2000::/3'],
  // IPv4-compatible (deprecated): refused whatever it carries.
  ['::127.0.0.1', 'IPv4-compatible'],
  ['::8.8.8.8', 'IPv4-compatible'],
  ['::a00:1', 'IPv4-compatible'],
  // IPv4-mapped and IPv4-translated: judged by the IPv4 address.
  ['::ffff:127.0.0.1', 'loopback'],
  ['::ffff:10.0.0.1', 'private'],
  ['::ffff:169.254.169.254', 'linkLocal'],
  ['::ffff:0:10.0.0.1', 'private'],
  ['::ffff:8.8.8.8', 'public'],
  // NAT64: the well-known prefix by its IPv4 address, the local-use prefix never.
  ['64:ff9b::a00:1', 'private'],
  ['64:ff9b::a9fe:a9fe', 'linkLocal'],
  ['64:ff9b::7f00:1', 'loopback'],
  ['64:ff9b::808:808', 'public'],
  ['64:ff9b:1::a00:1', 'local-use NAT64'],
  ['64:ff9b:1::808:808', 'local-use NAT64'],
  // 6to4: by the gateway's IPv4 address.
  ['2002:7f00:1::', 'loopback'],
  ['2002:a00:1::1', 'private'],
  ['2002:a9fe:a9fe::', 'linkLocal'],
  ['2002:808:808::1', 'public'],
  // Teredo: by the server (bits 32-63) and the client (the last 32 bits, inverted).
  ['2001:0:a00:1::fefe:fefe', 'private'],
  ['2001:0:808:808::80ff:fffe', 'loopback'],
  ['2001:0:4136:e378:8000:63bf:3fff:fdd2', 'reserved'],
  ['2001:0:808:808::fefe:fefe', 'public'],
  // Global unicast.
  ['2606:4700:4700::1111', 'public'],
  ['2001:4860:4860::8888', 'public'],
  ['2a00:1450:4001::1', 'public'],
  // Not an address at all.
  ['example.com', 'not an IP address'],
  ['', 'not an IP address'],
  ['1.2.3', 'not an IP address'],
];

describe('addressProblem', () => {
  it(`judges ${TABLE.length} addresses: every non-public range refused, naming why`, () => {
    expect(TABLE.length).toBeGreaterThanOrEqual(40);
    for (const [address, expected] of TABLE) {
      const problem = addressProblem(address);
      if (expected === 'public') {
        expect(problem, address).toBeUndefined();
        expect(isPublicAddress(address), address).toBe(true);
      } else {
        expect(problem, address).toContain(expected);
        expect(isPublicAddress(address), address).toBe(false);
      }
    }
  });
});

describe('hostProblem (no DNS)', () => {
  it('refuses IP literals that are not public and localhost names, trailing dots included', () => {
    for (const host of [
      'localhost',
      'localhost.',
      'LOCALHOST..',
      'a.localhost',
      'a.b.localhost.',
      '[::1]',
      '[::127.0.0.1]',
      '[64:ff9b::a9fe:a9fe]',
      '[2002:7f00:1::]',
      '127.0.0.1',
      '',
    ]) {
      expect(hostProblem(host), host).toBeDefined();
    }
    for (const host of [
      'example.com',
      'localhost.example.com',
      'mylocalhost',
      '[2606:4700:4700::1111]',
      '8.8.8.8',
    ])
      expect(hostProblem(host), host).toBeUndefined();
  });
});

/** A resolver from a table; names not in it fail like NXDOMAIN, `hang` never answers. */
function resolver(table: Record<string, string[]>): ResolveAll {
  return (hostname, _options, callback) => {
    if (hostname === 'hang.example') return;
    const found = table[hostname];
    if (!found) {
      const err: NodeJS.ErrnoException = new Error(`getaddrinfo ENOTFOUND ${hostname}`);
      err.code = 'ENOTFOUND';
      return callback(err, []);
    }
    callback(
      null,
      found.map((address): LookupAddress => ({ address, family: address.includes(':') ? 6 : 4 })),
    );
  };
}

const dns = resolver({
  'public.example': ['93.184.216.34', '2606:4700:4700::1111'],
  'internal.example': ['10.0.0.7'],
  'mixed.example': ['93.184.216.34', '::1'],
  'nat64-metadata.example': ['64:ff9b::a9fe:a9fe'],
});

describe('resolvedHostProblem (ingest)', () => {
  it('refuses a name when any address it resolves to is not public', async () => {
    expect(await resolvedHostProblem('internal.example', dns)).toMatch(
      /internal\.example resolves to 10\.0\.0\.7/,
    );
    expect(await resolvedHostProblem('mixed.example', dns)).toMatch(
      /::1 is not a public address \(loopback\)/,
    );
    expect(await resolvedHostProblem('nat64-metadata.example', dns)).toMatch(/linkLocal/);
    expect(await resolvedHostProblem('localhost.', dns)).toMatch(/loopback name/);
    expect(await resolvedHostProblem('[::127.0.0.1]', dns)).toMatch(/IPv4-compatible/);
  });

  it('accepts a public name, and leaves one that does not resolve (or not in time) to the connection', async () => {
    expect(await resolvedHostProblem('public.example', dns)).toBeUndefined();
    expect(await resolvedHostProblem('nowhere.example', dns)).toBeUndefined();
    expect(await resolvedHostProblem('hang.example', dns, 20)).toBeUndefined();
  });
});

describe('guardLookup (connect time)', () => {
  const lookup = guardLookup(dns);
  const run = (host: string, all: boolean) =>
    new Promise<{ err: NodeJS.ErrnoException | null; address: unknown }>((done) =>
      lookup(host, { all }, (err, address) => done({ err, address })),
    );

  it('refuses with EPRIVATEADDRESS what the socket would connect to, also a localhost. name', async () => {
    for (const host of ['internal.example', 'mixed.example', 'nat64-metadata.example', 'localhost.']) {
      const { err } = await run(host, true);
      expect(err?.code, host).toBe('EPRIVATEADDRESS');
    }
  });

  it('hands public addresses on, all of them or the first', async () => {
    expect((await run('public.example', true)).address).toHaveLength(2);
    expect(await run('public.example', false)).toEqual({ err: null, address: '93.184.216.34' });
    expect((await run('nowhere.example', false)).err?.code).toBe('ENOTFOUND');
  });
});

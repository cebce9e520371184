import type { LookupAddress } from 'node:dns';
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { afterAll, afterEach, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import type { ResolveAll } from '../../src/shared/address-policy.js';
import { GenericWebhookSender } from '../../src/shared/delivery/generic-sender.js';
import { FileRefusedError } from '../../src/shared/errors.js';
import { waitReady } from '../../src/shared/redis.js';
import { standardSources } from '../../src/shared/webhooks/standard.js';
import { createSafeDownload } from '../../src/worker/agent/safe-download.js';
import { queueMetaWritten, type TestIngress, testIngress } from '../helpers/ingress.js';
import { deletePrefix, keysUnder, randomPrefix, testRedis } from '../helpers/redis.js';
import { signedHeaders, webhookSecret } from '../helpers/webhooks.js';

/**
 * The address policy where a user names a URL: at ingest (reply URLs and file parts, 400 and
 * nothing written) and at connect time (the worker's download, the reply sender), with the
 * hosts a hostile client tried — IPv4 inside IPv6 (IPv4-compatible, NAT64, 6to4) and a
 * loopback name with a trailing dot — and a name whose DNS points inside.
 */

const SECRET = webhookSecret();
const redis = testRedis('ingress');
let prefix: string;
let ing: TestIngress;

/** DNS for the test: `inside.example` points at loopback (a rebinding record), the rest is public. */
const dns: ResolveAll = (hostname, _options, callback) => {
  const address =
    hostname === 'inside.example' || hostname === 'hooks.internal' ? '127.0.0.1' : '93.184.216.34';
  callback(null, [{ address, family: 4 } satisfies LookupAddress]);
};

const HOSTILE = [
  'https://[::127.0.0.1]/',
  'https://[64:ff9b::a00:1]/',
  'https://[64:ff9b::a9fe:a9fe]/',
  'https://[2002:7f00:1::]/',
  'https://localhost./',
  'https://inside.example/hook',
];

async function startIngress(hosts: string[] = []): Promise<void> {
  ing = await testIngress(redis, prefix, {
    genericWebhooks: {
      sources: standardSources([{ name: 'crm', secrets: [SECRET] }]),
      replyPolicy: { allowHttp: true, hosts },
    },
    resolve: dns,
  });
  await queueMetaWritten(redis, prefix);
}

beforeAll(() => waitReady(redis));
beforeEach(async () => {
  prefix = randomPrefix('addrpol');
});
afterEach(async () => {
  await ing.close();
  await deletePrefix(redis, prefix);
});
afterAll(() => redis.disconnect());

function postWebhook(body: Record<string, unknown>) {
  const payload = JSON.stringify(body);
  return ing.app.inject({
    method: 'POST',
    url: '/webhooks/generic/crm',
    headers: signedHeaders(SECRET, payload),
    payload,
  });
}

/** The answer's status and code, and that the keyspace is the same after as before. */
async function refusedWhole(send: () => Promise<{ statusCode: number; json(): unknown }>) {
  const before = await keysUnder(redis, prefix);
  const res = await send();
  expect(await keysUnder(redis, prefix)).toEqual(before);
  return { status: res.statusCode, code: (res.json() as { error?: { code: string } }).error?.code };
}

describe('at ingest', () => {
  beforeEach(() => startIngress());

  it.each(HOSTILE)('refuses %s as a replyTo.url: 400 REPLY_URL_NOT_ALLOWED, nothing written', async (url) => {
    expect(await refusedWhole(() => postWebhook({ chatKey: 'c1', text: 'hi', replyTo: { url } }))).toEqual({
      status: 400,
      code: 'REPLY_URL_NOT_ALLOWED',
    });
  });

  it.each(HOSTILE)(
    'refuses %s as a file part URL: 400 FILE_URL_NOT_ALLOWED, nothing written',
    async (url) => {
      const parts = [{ type: 'file', mediaType: 'image/png', url: `${url}cat.png` }];
      expect(
        await refusedWhole(() =>
          ing.app.inject({ method: 'POST', url: '/v1/chats/c1/messages', payload: { text: 'look', parts } }),
        ),
      ).toEqual({ status: 400, code: 'FILE_URL_NOT_ALLOWED' });
      expect(await refusedWhole(() => postWebhook({ chatKey: 'c1', text: 'look', parts }))).toEqual({
        status: 400,
        code: 'FILE_URL_NOT_ALLOWED',
      });
    },
  );

  it('accepts a name that resolves to public addresses, and a public address inside NAT64', async () => {
    const res = await postWebhook({
      chatKey: 'c1',
      parts: [{ type: 'file', mediaType: 'image/png', url: 'https://[64:ff9b::808:808]/cat.png' }],
      replyTo: { url: 'https://hooks.example.com/chatlane' },
    });
    expect(res.statusCode).toBe(202);
  });
});

describe('the operator allowlist (GENERIC_WEBHOOK_REPLY_HOSTS)', () => {
  it('still lets listed hosts through, names resolving inside and loopback literals included', async () => {
    await startIngress(['hooks.internal', '127.0.0.1']);
    for (const url of ['https://hooks.internal/chatlane', 'http://127.0.0.1:4000/hook']) {
      const res = await postWebhook({ chatKey: 'c1', text: 'hi', replyTo: { url } });
      expect(res.statusCode, url).toBe(202);
    }
    expect(
      (await postWebhook({ chatKey: 'c1', text: 'hi', replyTo: { url: 'https://other.example/' } }))
        .statusCode,
    ).toBe(400);
  });
});

describe('at connect time', () => {
  let server: Server;
  let hits = 0;
  beforeAll(async () => {
    server = createServer((_req, res) => {
      hits++;
      res.writeHead(200).end();
    });
    await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  });
  afterAll(() => new Promise((resolve) => server.close(resolve)));
  beforeEach(() => startIngress());

  it('the worker download refuses each hostile host without connecting', async () => {
    const download = createSafeDownload({ maxBytes: 1000, timeoutMs: 2000, resolve: dns });
    for (const url of HOSTILE) {
      const fetching = download([{ url: new URL(`${url}x.png`), isUrlSupportedByModel: true }]);
      const err = await Promise.resolve(fetching).catch((e: unknown) => e);
      expect(err, url).toBeInstanceOf(FileRefusedError);
      expect((err as Error).message, url).toMatch(/not a public address|loopback name/);
    }
  });

  it('the reply sender refuses each hostile host for good, and posts nothing', async () => {
    const port = (server.address() as AddressInfo).port;
    const sender = new GenericWebhookSender(standardSources([{ name: 'crm', secrets: [SECRET] }]), {
      allowHttp: true,
      hosts: [],
    });
    // A name resolving to this test's own receiver, refused on the address the socket would use.
    const urls = [...HOSTILE.slice(0, -1), `http://localhost.:${port}/`];
    for (const url of urls) {
      const result = await sender.send({
        chatKey: 'c1',
        route: { channel: 'generic', source: 'crm', url },
        item: { id: '1-0', text: 'x', ts: 1, runId: 'r' },
        attempt: 1,
        signal: AbortSignal.timeout(2000),
      });
      expect(result, url).toMatchObject({
        status: 'failed',
        reason: expect.stringMatching(/^reply URL refused/),
      });
    }
    expect(hits).toBe(0);
  });
});

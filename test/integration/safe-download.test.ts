import { readFileSync } from 'node:fs';
import { createServer, type Server } from 'node:https';
import type { AddressInfo } from 'node:net';
import { afterAll, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import type { ResolveAll } from '../../src/shared/address-policy.js';
import { FileRefusedError } from '../../src/shared/errors.js';
import { createSafeDownload } from '../../src/worker/agent/safe-download.js';
import { runTurn, type TurnDeps } from '../../src/worker/turn/turn.js';
import { userMessage } from '../helpers/messages.js';
import { deleteLabel, randomPrefix, testRedis } from '../helpers/redis.js';
import { echoScript, scriptedModel } from '../helpers/scripted-model.js';
import { turnDeps } from '../helpers/turn-deps.js';

// A test-only self-signed certificate for *.example.test names (test/fixtures/tls).
const tls = {
  cert: readFileSync(new URL('../fixtures/tls/cert.pem', import.meta.url)),
  key: readFileSync(new URL('../fixtures/tls/key.pem', import.meta.url)),
};
const PNG = Buffer.from('89504e470d0a1a0a0000', 'hex');

let server: Server;
let port: number;
const redis = testRedis();
let prefix: string;

beforeAll(async () => {
  server = createServer(tls, (req, res) => {
    if (req.url === '/cat.png') return res.writeHead(200, { 'content-type': 'image/png' }).end(PNG);
    if (req.url === '/big.png')
      return res.writeHead(200, { 'content-type': 'image/png' }).end(Buffer.alloc(5000));
    if (req.url === '/hang.png') return res.writeHead(200, { 'content-type': 'image/png' }).write(PNG);
    if (req.url === '/to-metadata')
      return res.writeHead(302, { location: 'https://169.254.169.254/latest' }).end();
    if (req.url === '/to-evil') return res.writeHead(302, { location: '/cat.png' }).end();
    res.writeHead(404).end();
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  port = (server.address() as AddressInfo).port;
});
beforeEach(() => {
  prefix = randomPrefix('safedl');
});
afterAll(async () => {
  server.closeAllConnections();
  await new Promise((resolve) => server.close(resolve));
  await deleteLabel(redis, 'safedl');
  redis.disconnect();
});

/** A resolver that answers every name with 127.0.0.1, like a hostile DNS record would. */
const toLoopback: ResolveAll = (_hostname, _options, callback) =>
  callback(null, [{ address: '127.0.0.1', family: 4 }]);

const fetchOne = async (download: ReturnType<typeof createSafeDownload>, url: string) =>
  (await download([{ url: new URL(url), isUrlSupportedByModel: true }]))[0];

describe('the safe file download', () => {
  it('refuses a host name that resolves to 127.0.0.1, judged after DNS resolution', async () => {
    const download = createSafeDownload({
      maxBytes: 1000,
      timeoutMs: 2000,
      resolve: toLoopback,
      ca: tls.cert,
    });
    // The server is really there on 127.0.0.1: only the address check stops the request.
    const err = await fetchOne(download, `https://files.example.test:${port}/cat.png`).catch(
      (e: unknown) => e,
    );
    expect(err).toBeInstanceOf(FileRefusedError);
    expect((err as Error).message).toMatch(/resolves to 127\.0\.0\.1 is not a public address \(loopback\)/);
  });

  it('refuses IP literals, http: URLs and redirects to a private address', async () => {
    const open = createSafeDownload({
      maxBytes: 1000,
      timeoutMs: 2000,
      resolve: toLoopback,
      // Lets this test's server count as public, so the redirect itself is what is judged.
      blocked: (address) => address !== '127.0.0.1',
      ca: tls.cert,
    });
    const strict = createSafeDownload({ maxBytes: 1000, timeoutMs: 2000 });
    await expect(fetchOne(strict, `https://127.0.0.1:${port}/cat.png`)).rejects.toThrow(
      /127\.0\.0\.1 is not a public address/,
    );
    await expect(fetchOne(strict, 'https://[::1]/x.png')).rejects.toThrow(/::1 is not a public address/);
    await expect(fetchOne(strict, 'http://example.com/x.png')).rejects.toThrow(/https: only/);
    await expect(fetchOne(open, `https://files.example.test:${port}/to-metadata`)).rejects.toThrow(
      /169\.254\.169\.254 is not a public address \(linkLocal\)/,
    );
  });

  it('fetches an allowed https file, following a redirect, within the size cap and timeout', async () => {
    const open = createSafeDownload({
      maxBytes: 1000,
      timeoutMs: 300,
      resolve: toLoopback,
      blocked: () => false,
      ca: tls.cert,
    });
    const got = await fetchOne(open, `https://files.example.test:${port}/to-evil`);
    expect(Buffer.from(got!.data)).toEqual(PNG);
    expect(got!.mediaType).toBe('image/png');
    await expect(fetchOne(open, `https://files.example.test:${port}/big.png`)).rejects.toThrow(
      /FILE_FETCH_MAX_BYTES/,
    );
    await expect(fetchOne(open, `https://files.example.test:${port}/hang.png`)).rejects.toThrow(
      /FILE_FETCH_TIMEOUT_MS/,
    );
    await expect(fetchOne(open, `https://files.example.test:${port}/gone.png`)).rejects.toThrow(
      /answered 404/,
    );
  });

  it('a refused file fails that message with one notice, and the chat’s next message is answered', async () => {
    const { model, prompts } = scriptedModel(echoScript);
    const deps: TurnDeps = {
      ...turnDeps(redis, prefix, model),
      download: createSafeDownload({ maxBytes: 1000, timeoutMs: 2000, resolve: toLoopback }),
    };
    const limits = { maxPending: 10, dedupWindowMs: 60_000 };
    const withFile = userMessage('c1', 'f1', 'what is in this picture?');
    withFile.parts.push({
      type: 'file',
      mediaType: 'image/png',
      url: `https://files.example.test:${port}/cat.png`,
    });
    await deps.store.ingest('c1', withFile, limits);

    expect(await runTurn(deps, 'c1')).toMatchObject({ status: 'failed', code: 'FILE_REFUSED', pending: 0 });
    expect(prompts).toHaveLength(0);
    const [failed] = await deps.store.readHistory('c1');
    expect(failed?.metadata).toMatchObject({ failed: true, failure: { code: 'FILE_REFUSED' } });
    expect(failed?.metadata.failure?.detail).toMatch(/not a public address/);

    await deps.store.ingest('c1', userMessage('c1', 'f2', 'never mind, hello'), limits);
    expect(await runTurn(deps, 'c1')).toMatchObject({ status: 'done', consumed: 1 });
    const outbox = (await deps.store.readOutbox('c1', undefined, 10)).map((o) => o.text);
    expect(outbox).toHaveLength(2);
    expect(outbox[0]).toMatch(/couldn't process your last message/);
    expect(outbox[1]).toContain('never mind, hello');
  });
});

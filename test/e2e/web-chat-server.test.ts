import { mkdir, mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { decodeJwt, jwtVerify } from 'jose';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startWebChatServer, type WebChatServer } from '../../src/demo/web.js';
import { webTokenKey } from '../../src/shared/web-token.js';
import { rawHttp } from '../helpers/raw-http.js';

/** The demo's page server: the built page's files and nothing else, and a token per chat. */

const SECRET = 'web-token-secret-for-the-page-server-tests';

describe('the web chat page server (chatlane demo --web)', () => {
  let dir: string;
  let web: WebChatServer;

  beforeAll(async () => {
    const root = await mkdtemp(join(tmpdir(), 'web-chat-server-'));
    dir = join(root, 'dist');
    await mkdir(join(dir, 'assets'), { recursive: true });
    await writeFile(join(dir, 'index.html'), '<!doctype html><title>page</title>');
    await writeFile(join(dir, 'assets', 'app.js'), 'console.log(1)');
    await writeFile(join(root, 'secret.txt'), 'not for the web');
    web = await startWebChatServer({ dir, secret: SECRET, ingressUrl: () => 'http://ingress.test' });
  });

  afterAll(async () => {
    await web?.close();
    await rm(join(dir, '..'), { recursive: true, force: true });
  });

  it('serves the page at / and its assets with their types', async () => {
    const page = await fetch(`${web.url}/`);
    expect(page.status).toBe(200);
    expect(page.headers.get('content-type')).toBe('text/html; charset=utf-8');
    expect(await page.text()).toContain('<title>page</title>');
    const js = await fetch(`${web.url}/assets/app.js`);
    expect(js.headers.get('content-type')).toBe('text/javascript; charset=utf-8');
  });

  it('serves nothing outside the build: 404 for other paths, however they are spelled', async () => {
    // Sent as written: an HTTP client library would tidy the dots away first.
    const port = Number(new URL(web.url).port);
    for (const path of [
      '/secret.txt',
      '/../secret.txt',
      '/%2e%2e/secret.txt',
      '/assets/../../secret.txt',
      '/nope',
    ]) {
      const res = await rawHttp(port, [`GET ${path} HTTP/1.1\r\nhost: page\r\nconnection: close\r\n\r\n`]);
      expect(res.status, path).toBe(404);
      expect(res.body).not.toContain('not for the web');
    }
  });

  it('refuses other methods with 405', async () => {
    expect((await fetch(`${web.url}/token?chat=a`, { method: 'POST' })).status).toBe(405);
  });

  it('mints a token for the chat asked for, signed with the secret, and names the ingress', async () => {
    const res = await fetch(`${web.url}/token?chat=alice-1`);
    expect(res.status).toBe(200);
    const body = (await res.json()) as { api: string; chat: string; token: string };
    expect(body.api).toBe('http://ingress.test');
    expect(body.chat).toBe('alice-1');
    const { payload } = await jwtVerify(body.token, webTokenKey(SECRET));
    expect(payload.sub).toBe('alice-1');
    expect(payload.exp).toBeGreaterThan(Date.now() / 1000);
  });

  it('picks a fresh chat when none is named', async () => {
    const a = (await (await fetch(`${web.url}/token`)).json()) as { chat: string; token: string };
    const b = (await (await fetch(`${web.url}/token`)).json()) as { chat: string };
    expect(a.chat).toMatch(/^web-[0-9a-f]{8}$/);
    expect(b.chat).not.toBe(a.chat);
    expect(decodeJwt(a.token).sub).toBe(a.chat);
  });

  it('refuses a chat that is not a chatKey with 400 INVALID_CHAT_KEY and mints nothing', async () => {
    const res = await fetch(`${web.url}/token?chat=${encodeURIComponent('no spaces/or slashes')}`);
    expect(res.status).toBe(400);
    const body = (await res.json()) as { error: { code: string }; token?: string };
    expect(body.error.code).toBe('INVALID_CHAT_KEY');
    expect(body.token).toBeUndefined();
  });
});

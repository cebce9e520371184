import { afterAll, afterEach, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import { waitReady } from '../../src/shared/redis.js';
import { standardSources } from '../../src/shared/webhooks/standard.js';
import { queueMetaWritten, type TestIngress, testIngress } from '../helpers/ingress.js';
import { deletePrefix, keysUnder, randomPrefix, testRedis } from '../helpers/redis.js';
import { signedHeaders, webhookSecret } from '../helpers/webhooks.js';

const SECRET = webhookSecret();
const redis = testRedis('ingress');
let prefix: string;
let ing: TestIngress;

beforeAll(() => waitReady(redis));
beforeEach(async () => {
  prefix = randomPrefix('files');
  ing = await testIngress(redis, prefix, {
    files: { mediaTypes: ['image/*', 'application/pdf'], maxDataBytes: 64 },
    genericWebhooks: {
      sources: standardSources([{ name: 'crm', secrets: [SECRET] }]),
      replyPolicy: { allowHttp: false, hosts: [] },
    },
  });
  await queueMetaWritten(redis, prefix);
});
afterEach(async () => {
  await ing.close();
  await deletePrefix(redis, prefix);
});
afterAll(() => redis.disconnect());

type FilePart = { type: 'file'; mediaType: string; url: string };
const file = (url: string, mediaType = 'image/png'): FilePart => ({ type: 'file', mediaType, url });
const b64 = (bytes: number) => Buffer.alloc(bytes, 7).toString('base64');

/** Both entry points, each posting a message with `parts`. */
const entryPoints = {
  'HTTP API': (parts: FilePart[]) =>
    ing.app.inject({ method: 'POST', url: '/v1/chats/c1/messages', payload: { text: 'look', parts } }),
  'signed generic webhook': (parts: FilePart[]) => {
    const payload = JSON.stringify({ chatKey: 'c1', text: 'look', parts });
    return ing.app.inject({
      method: 'POST',
      url: '/webhooks/generic/crm',
      headers: signedHeaders(SECRET, payload),
      payload,
    });
  },
};

const refused: Array<[string, FilePart, string]> = [
  ['an http: URL', file('http://example.com/cat.png'), 'FILE_URL_NOT_ALLOWED'],
  ['a file: URL', file('file:///etc/passwd'), 'FILE_URL_NOT_ALLOWED'],
  ['an ftp: URL', file('ftp://example.com/cat.png'), 'FILE_URL_NOT_ALLOWED'],
  ['an https: URL naming a loopback address', file('https://127.0.0.1/cat.png'), 'FILE_URL_NOT_ALLOWED'],
  [
    'an https: URL naming the metadata address',
    file('https://169.254.169.254/latest'),
    'FILE_URL_NOT_ALLOWED',
  ],
  ['an https: URL naming [::1]', file('https://[::1]/cat.png'), 'FILE_URL_NOT_ALLOWED'],
  ['an https: URL naming localhost', file('https://localhost/cat.png'), 'FILE_URL_NOT_ALLOWED'],
  ['an https: URL with credentials', file('https://u:p@example.com/cat.png'), 'FILE_URL_NOT_ALLOWED'],
  ['a malformed data: URL', file('data:image/png;base64,***'), 'FILE_URL_NOT_ALLOWED'],
  ['a data: URL that is not base64', file('data:image/png,hello%20world'), 'FILE_URL_NOT_ALLOWED'],
  ['a base64 data: URL that cannot decode', file('data:image/png;base64,abcde'), 'FILE_URL_NOT_ALLOWED'],
  ['a data: URL over the cap', file(`data:image/png;base64,${b64(65)}`), 'FILE_TOO_LARGE'],
  ['a mediaType off the allowlist', file('https://example.com/x.html', 'text/html'), 'FILE_TYPE_NOT_ALLOWED'],
  ['a malformed mediaType', file('https://example.com/x', 'image'), 'FILE_TYPE_NOT_ALLOWED'],
  [
    'a data: URL whose own type is off the allowlist',
    file(`data:text/html;base64,${b64(10)}`),
    'FILE_TYPE_NOT_ALLOWED',
  ],
];

describe.each(Object.entries(entryPoints))('file parts at ingest: %s', (_name, postParts) => {
  it.each(refused)('refuses %s with 400 and writes nothing', async (_what, part, code) => {
    const before = await keysUnder(redis, prefix);
    const res = await postParts([file('https://example.com/ok.png'), part]);
    expect(res.statusCode).toBe(400);
    expect(res.json()).toEqual({ error: { code, message: expect.stringMatching(/message part 2: /) } });
    expect(await keysUnder(redis, prefix)).toEqual(before);
  });

  it('accepts https: URLs and data: URLs up to the cap with an allowed mediaType', async () => {
    const res = await postParts([
      file('https://files.example.com/cat.png'),
      file('https://files.example.com/doc.pdf', 'application/pdf'),
      file(`data:image/png;base64,${b64(64)}`, 'image/png'),
    ]);
    expect(res.statusCode).toBe(202);
    const [message] = await ing.store.readAllPending('c1');
    expect(message!.parts.filter((p) => p.type === 'file')).toHaveLength(3);
  });
});

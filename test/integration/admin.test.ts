import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { QUEUE_DESCRIPTIONS, type QueueName } from '../../src/shared/jobs.js';
import { waitReady } from '../../src/shared/redis.js';
import { type OpsIngress, opsIngress } from '../helpers/ops-ingress.js';
import { deletePrefix, randomPrefix, testRedis } from '../helpers/redis.js';

const redis = testRedis('ingress');
const prefix = randomPrefix('admin');
let ing: OpsIngress | undefined;

beforeAll(() => waitReady(redis));
afterEach(async () => {
  await ing?.close();
  ing = undefined;
});
afterAll(async () => {
  await deletePrefix(redis, prefix);
  redis.disconnect();
});

const basic = (user: string, password: string) =>
  `Basic ${Buffer.from(`${user}:${password}`).toString('base64')}`;
const get = (url: string, authorization?: string) =>
  ing!.app.inject({ method: 'GET', url, headers: authorization ? { authorization } : {} });

interface BoardQueue {
  name: string;
  readOnlyMode: boolean;
  description?: string;
}
const boardQueues = async (authorization: string) => {
  const res = await get('/admin/queues/api/queues', authorization);
  expect(res.statusCode).toBe(200);
  return (res.json() as { queues: BoardQueue[] }).queues;
};

describe('Bull Board at /admin/queues', () => {
  it('answers 401 with a Basic challenge without credentials or with wrong ones, on every board route', async () => {
    ing = await opsIngress(redis, prefix, { admin: { user: 'ops', password: 'pa:ss' } });
    for (const url of ['/admin/queues', '/admin/queues/api/queues', '/admin/queues/queue/turns']) {
      const none = await get(url);
      expect(none.statusCode, url).toBe(401);
      expect(none.headers['www-authenticate']).toMatch(/^Basic realm=/);
      expect(none.json().error.code).toBe('UNAUTHORIZED');
      expect((await get(url, basic('ops', 'wrong'))).statusCode, url).toBe(401);
      expect((await get(url, basic('someone', 'pa:ss'))).statusCode, url).toBe(401);
      expect((await get(url, 'Bearer pa:ss')).statusCode, url).toBe(401);
    }
  });

  it('serves the board and lists every queue, maintenance included, each with its description (password may hold a colon)', async () => {
    ing = await opsIngress(redis, prefix, { admin: { user: 'ops', password: 'pa:ss' } });
    const page = await get('/admin/queues', basic('ops', 'pa:ss'));
    expect(page.statusCode).toBe(200);
    expect(page.headers['content-type']).toMatch(/text\/html/);
    const queues = await boardQueues(basic('ops', 'pa:ss'));
    expect(queues.map((q) => q.name).sort()).toEqual(['compaction', 'deliveries', 'maintenance', 'turns']);
    expect(queues.every((q) => q.readOnlyMode === false)).toBe(true);
    for (const q of queues) expect(q.description, q.name).toBe(QUEUE_DESCRIPTIONS[q.name as QueueName]);
    expect(queues.find((q) => q.name === 'maintenance')?.description).toMatch(/sweeper/);
  });

  it('leaves /v1, /healthz and /metrics alone: no board credentials needed there', async () => {
    ing = await opsIngress(redis, prefix, { admin: { user: 'ops', password: 'secret' } });
    const posted = await ing.app.inject({
      method: 'POST',
      url: '/v1/chats/alice/messages',
      headers: { 'content-type': 'application/json' },
      payload: JSON.stringify({ id: 'm1', text: 'hi' }),
    });
    expect(posted.statusCode).toBe(202);
    expect((await get('/v1/chats/alice/messages')).statusCode).toBe(200);
    expect((await get('/healthz')).statusCode).toBe(200);
    expect((await get('/metrics')).statusCode).toBe(200);
  });

  it('keeps the API token and the board credentials apart', async () => {
    ing = await opsIngress(redis, prefix, { admin: { user: 'ops', password: 'secret' }, apiToken: 'tok' });
    // The board password opens nothing under /v1, the API token nothing on the board.
    expect((await get('/v1/chats/alice/messages', basic('ops', 'secret'))).statusCode).toBe(401);
    expect((await get('/v1/chats/alice/messages', 'Bearer tok')).statusCode).toBe(200);
    expect((await get('/admin/queues', 'Bearer tok')).statusCode).toBe(401);
    expect((await get('/admin/queues', basic('ops', 'secret'))).statusCode).toBe(200);
  });

  it('marks every queue read-only when readOnly is set and refuses actions (pause) with 405', async () => {
    ing = await opsIngress(redis, prefix, { admin: { user: 'ops', password: 'secret', readOnly: true } });
    const queues = await boardQueues(basic('ops', 'secret'));
    expect(queues).toHaveLength(4);
    expect(queues.every((q) => q.readOnlyMode === true)).toBe(true);
    const pause = await ing.app.inject({
      method: 'PUT',
      url: '/admin/queues/api/queues/turns/pause',
      headers: { authorization: basic('ops', 'secret') },
    });
    expect(pause.statusCode).toBe(405);
    expect(await ing.turns.isPaused()).toBe(false);
  });

  it('lets a read-write board act on a queue (pause, then resume)', async () => {
    ing = await opsIngress(redis, prefix, { admin: { user: 'ops', password: 'secret' } });
    const put = (action: string) =>
      ing!.app.inject({
        method: 'PUT',
        url: `/admin/queues/api/queues/turns/${action}`,
        headers: { authorization: basic('ops', 'secret') },
      });
    expect((await put('pause')).statusCode).toBeLessThan(300);
    expect(await ing.turns.isPaused()).toBe(true);
    expect((await put('resume')).statusCode).toBeLessThan(300);
    expect(await ing.turns.isPaused()).toBe(false);
  });

  it.each([
    [{}, 'ADMIN_USER and ADMIN_PASSWORD'],
    [{ user: 'ops' }, 'ADMIN_PASSWORD'],
    [{ password: 'secret' }, 'ADMIN_USER'],
  ])('is not mounted without both credentials (%j) and the log warns naming %s', async (admin, missing) => {
    ing = await opsIngress(redis, prefix, { admin });
    expect((await get('/admin/queues')).statusCode).toBe(404);
    expect((await get('/admin/queues/api/queues', basic('ops', 'secret'))).statusCode).toBe(404);
    const warn = ing.logs.find((l) => l.level === 40 && l.msg.includes('Bull Board not mounted'));
    expect(warn?.msg).toContain(`set ${missing} `);
    expect((await get('/healthz')).statusCode).toBe(200);
  });
});

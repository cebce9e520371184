import { existsSync } from 'node:fs';
import { type Browser, chromium } from 'playwright-core';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { enqueueTurn, QUEUE_DESCRIPTIONS } from '../../src/shared/jobs.js';
import { waitReady } from '../../src/shared/redis.js';
import { type OpsIngress, opsIngress } from '../helpers/ops-ingress.js';
import { deletePrefix, randomPrefix, testRedis } from '../helpers/redis.js';

const CHROMIUM = '/usr/bin/chromium';
const haveChromium = existsSync(CHROMIUM);
const USER = 'ops';
const PASSWORD = 'board-secret';

describe.skipIf(!haveChromium)(
  `Bull Board in headless Chromium${haveChromium ? '' : ` (skipped: ${CHROMIUM} is missing; apt-get install -y chromium)`}`,
  () => {
    const redis = testRedis('ingress');
    const prefix = randomPrefix('board');
    let ing: OpsIngress;
    let url: string;
    let browser: Browser;

    beforeAll(async () => {
      await waitReady(redis);
      ing = await opsIngress(redis, prefix, { admin: { user: USER, password: PASSWORD } });
      url = await ing.app.listen({ host: '127.0.0.1', port: 0 });
      // Something to see on the board.
      await enqueueTurn(ing.turns, 'alice');
      browser = await chromium.launch({
        executablePath: CHROMIUM,
        args: [
          '--headless',
          '--no-sandbox',
          '--disable-gpu',
          '--disable-quic',
          '--no-first-run',
          '--disable-background-networking',
          '--disable-component-update',
          '--disable-sync',
        ],
      });
    }, 60_000);

    afterAll(async () => {
      await browser?.close();
      await ing?.close();
      await deletePrefix(redis, prefix);
      redis.disconnect();
    });

    it('logs in with the configured credentials and shows every queue, maintenance included, with its description', async () => {
      const context = await browser.newContext({ httpCredentials: { username: USER, password: PASSWORD } });
      try {
        const page = await context.newPage();
        // The board runs under its Content-Security-Policy: nothing of it may be refused.
        const refused: string[] = [];
        page.on('console', (m) => {
          if (m.text().includes('Content Security Policy')) refused.push(m.text());
        });
        const response = await page.goto(`${url}/admin/queues`);
        expect(response?.status()).toBe(200);
        expect(response?.headers()['content-security-policy']).toContain("frame-ancestors 'none'");
        // The board is a client-side app: wait until it has fetched and rendered the queues.
        for (const name of ['turns', 'compaction', 'deliveries', 'maintenance']) {
          await page.getByText(name, { exact: true }).first().waitFor({ timeout: 20_000 });
        }
        const text = await page.locator('body').textContent();
        for (const name of ['turns', 'compaction', 'deliveries', 'maintenance']) expect(text).toContain(name);
        expect(await page.title()).toBe('chatlane queues');
        // A queue's page carries its description under the name.
        await page.goto(`${url}/admin/queues/queue/maintenance`);
        await page.getByText(QUEUE_DESCRIPTIONS.maintenance).first().waitFor({ timeout: 20_000 });
        expect(refused).toEqual([]);
      } finally {
        await context.close();
      }
    }, 60_000);

    it('refuses to be framed by another page (clickjacking an operator into a job action)', async () => {
      const context = await browser.newContext({ httpCredentials: { username: USER, password: PASSWORD } });
      try {
        const page = await context.newPage();
        const refused = new Promise<string>((resolve) => {
          page.on('console', (m) => {
            if (m.text().includes('frame-ancestors')) resolve(m.text());
          });
        });
        await page.setContent(`<iframe src="${url}/admin/queues"></iframe>`);
        // "Framing '…' violates the following Content Security Policy directive: frame-ancestors 'none'"
        expect(await refused).toMatch(/(Refused to frame|Framing) .*frame-ancestors 'none'/);
        const frame = page.frames().find((f) => f !== page.mainFrame());
        expect(
          await frame
            ?.locator('body')
            .textContent()
            .catch(() => ''),
        ).not.toContain('deliveries');
      } finally {
        await context.close();
      }
    }, 60_000);

    it('refuses a wrong password with 401 and shows no queue', async () => {
      const context = await browser.newContext({ httpCredentials: { username: USER, password: 'wrong' } });
      try {
        const page = await context.newPage();
        const response = await page.goto(`${url}/admin/queues`);
        expect(response?.status()).toBe(401);
        expect(await page.locator('body').textContent()).not.toContain('deliveries');
      } finally {
        await context.close();
      }
    }, 60_000);

    it('challenges a browser without credentials: 401 with WWW-Authenticate Basic', async () => {
      // Headless Chromium cannot show the login prompt (navigation fails with
      // ERR_INVALID_AUTH_CREDENTIALS), so ask through the context's own request client.
      const context = await browser.newContext();
      try {
        const response = await context.request.get(`${url}/admin/queues/api/queues`);
        expect(response.status()).toBe(401);
        expect(response.headers()['www-authenticate']).toMatch(/^Basic /);
      } finally {
        await context.close();
      }
    }, 60_000);
  },
);

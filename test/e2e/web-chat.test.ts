import { existsSync } from 'node:fs';
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { type Browser, type BrowserContext, chromium, type Page } from 'playwright-core';
import { build } from 'vite';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startWebChatServer, type WebChatServer } from '../../src/demo/web.js';
import { mintWebToken } from '../../src/shared/web-token.js';
import { stepThrough } from '../helpers/held-stream.js';
import type { RoleProcess } from '../helpers/processes.js';
import { haveSandbox } from '../helpers/sandbox.js';
import { useStack } from '../helpers/stack.js';

/**
 * examples/web-chat (React, useChat with the default transport) built with Vite, served by
 * the demo's page server, in headless Chromium against real ingress and worker processes
 * and the mock model streaming chunk by chunk.
 */

const CHROMIUM = '/usr/bin/chromium';
const haveChromium = existsSync(CHROMIUM);
const SECRET = 'web-token-secret-for-the-web-chat-page-tests';
const LONG = 'the quick brown fox jumps over the lazy dog while the cat watches';
/** Short leases: a killed worker's turn is taken over within a few seconds. */
const FAST_RECOVERY = { TURN_LEASE_MS: '1500', JOB_LOCK_MS: '1500', STALLED_INTERVAL_MS: '500' };
const SKILLS_DIR = fileURLToPath(new URL('../../examples/skills/', import.meta.url));
const VITE_CONFIG = fileURLToPath(new URL('../../examples/web-chat/vite.config.ts', import.meta.url));

/**
 * Every change of the newest assistant message's text, as the page rendered it, with the
 * time: installed before the page's own scripts, again on each load.
 */
const FRAME_RECORDER = `
window.__frames = [];
// The text of the newest assistant message, as shown.
window.__shown = () => {
  const all = document.querySelectorAll('[data-role="assistant"]');
  const last = all[all.length - 1];
  return last ? { id: last.dataset.id, text: Array.from(last.querySelectorAll('.text'), (e) => e.textContent).join('') } : undefined;
};
const record = () => {
  const shown = window.__shown();
  if (!shown) return;
  const frames = window.__frames;
  if (frames.length === 0 || frames[frames.length - 1].text !== shown.text) frames.push({ at: Date.now(), ...shown });
};
document.addEventListener('DOMContentLoaded', () =>
  new MutationObserver(record).observe(document.body, { subtree: true, childList: true, characterData: true }),
);
`;

interface Frame {
  at: number;
  id: string;
  text: string;
}

describe.skipIf(!haveChromium)(
  `the web chat page in headless Chromium${haveChromium ? '' : ` (skipped: ${CHROMIUM} is missing; apt-get install -y chromium)`}`,
  () => {
    const stack = useStack('e2e-web-chat', {
      roles: [],
      // `$ command` waits for the person's approval (exec_shell runs only where its sandbox can).
      env: {
        WEB_TOKEN_SECRET: SECRET,
        SKILLS_DIR,
        ...FAST_RECOVERY,
        ...(haveSandbox && { EXEC_SHELL: 'approve' }),
      },
    });
    const { store } = stack;
    let outDir: string;
    let web: WebChatServer;
    let worker: RoleProcess;
    let browser: Browser;
    let context: BrowserContext;

    beforeAll(async () => {
      outDir = await mkdtemp(join(tmpdir(), 'web-chat-'));
      await build({ configFile: VITE_CONFIG, logLevel: 'error', build: { outDir, emptyOutDir: true } });
      web = await startWebChatServer({ dir: outDir, secret: SECRET, ingressUrl: () => stack.ingressUrl() });
      // The page is served from its own origin and calls the ingress across origins.
      stack.env.WEB_ORIGINS = web.url;
      await stack.start('ingress');
      worker = await stack.start('worker');
      browser = await chromium.launch({
        executablePath: CHROMIUM,
        args: [
          '--headless',
          '--no-sandbox',
          '--disable-gpu',
          '--no-first-run',
          '--disable-background-networking',
          '--disable-component-update',
          '--disable-sync',
        ],
      });
      context = await browser.newContext();
      await context.addInitScript({ content: FRAME_RECORDER });
    }, 90_000);

    afterAll(async () => {
      await browser?.close();
      await web?.close();
      if (outDir) await rm(outDir, { recursive: true, force: true });
    });

    /** The page for a chat, with a token from the page server (or the one given). */
    async function open(chat: string, token?: string, page?: Page): Promise<Page> {
      const p = page ?? (await context.newPage());
      const query = new URLSearchParams({ chat, ...(token ? { token, api: stack.ingressUrl() } : {}) });
      await p.goto(`${web.url}/?${query}`);
      await p.locator('main[data-status]').waitFor({ timeout: 15_000 });
      return p;
    }

    async function send(page: Page, text: string): Promise<void> {
      await page.getByRole('textbox', { name: 'message' }).fill(text);
      await page.getByRole('textbox', { name: 'message' }).press('Enter');
    }

    const assistants = (page: Page) => page.locator('[data-role="assistant"]');

    async function frames(page: Page): Promise<Frame[]> {
      return page.evaluate('window.__frames') as Promise<Frame[]>;
    }

    // The page's functions run in the browser; they are strings here, as the tests' own
    // TypeScript knows no DOM.
    /** Waits until the page shows this reply and is ready for the next message. */
    async function answered(page: Page, text: string): Promise<void> {
      await page.waitForFunction(
        `window.__shown()?.text === ${JSON.stringify(text)} && document.querySelector('main')?.dataset.status === 'ready'`,
        undefined,
        { timeout: 20_000 },
      );
    }

    /** The text of the newest reply the page shows now. */
    async function shown(page: Page): Promise<string> {
      return page.evaluate("window.__shown()?.text ?? ''") as Promise<string>;
    }

    /** Waits until the reply is partly shown. */
    async function underWay(page: Page, chars: number): Promise<void> {
      await page.waitForFunction(`(window.__shown()?.text ?? '').length > ${chars}`, undefined, {
        timeout: 15_000,
      });
    }

    /** The distinct non-empty texts the page showed for one message, in order. */
    function grown(all: Frame[], id: string): string[] {
      return all.filter((f) => f.id === id && f.text !== '').map((f) => f.text);
    }

    it('typed text is answered, and the reply text grows over several frames before the turn commits', async () => {
      const gates = stack.mock.state.chunkGates;
      gates.hold('web-grow');
      const page = await open('web-grow');
      await send(page, LONG);
      await stepThrough(gates, 'web-grow', `echo: ${LONG}`, () => shown(page));
      await answered(page, `echo: ${LONG}`);

      expect(await page.locator('[data-role="user"]').count()).toBe(1);
      expect(await assistants(page).count()).toBe(1);
      const id = (await assistants(page).getAttribute('data-id'))!;
      const texts = grown(await frames(page), id);
      expect(texts.length).toBeGreaterThanOrEqual(3);
      for (let i = 1; i < texts.length; i++) expect(texts[i]!.startsWith(texts[i - 1]!)).toBe(true);
      expect(texts.at(-1)).toBe(`echo: ${LONG}`);

      const committed = (await store.readEvents('web-grow', undefined, 100)).find(
        (e) => e.type === 'turn.committed',
      );
      const firstShown = (await frames(page)).find((f) => f.id === id && f.text !== '')!;
      expect(firstShown.at).toBeLessThan(committed!.ts);
      // What the page showed is the committed reply.
      const history = await store.readHistory('web-grow');
      expect(history.map((m) => [m.role, m.id])).toEqual([
        ['user', expect.any(String)],
        ['assistant', id],
      ]);
      await page.close();
    });

    it('a tool call is shown collapsed, its input inside; the reply after it is text', async () => {
      const page = await open('web-tool');
      // The mock model loads a skill the user names, then answers.
      const ask = 'skill: weather — what should I wear in Lisbon?';
      await send(page, ask);
      await answered(page, `echo: ${ask} (with skill weather)`);

      const tool = page.locator('details[data-tool="skills_load"]');
      expect(await tool.count()).toBe(1);
      expect(await tool.getAttribute('open')).toBeNull();
      expect(await tool.locator('pre').isVisible()).toBe(false);
      await tool.locator('summary').click();
      expect(await tool.locator('pre').textContent()).toContain('"name": "weather"');
      await page.close();
    });

    it('a reload mid-reply resumes the reply and follows it to the full text', async () => {
      const gates = stack.mock.state.chunkGates;
      // Held from its first piece until the reloaded page shows part of it: the page reloads
      // while the reply streams, however slowly it loads.
      gates.hold('web-reload');
      const page = await open('web-reload');
      await send(page, LONG);
      await underWay(page, 6);
      await page.reload();
      await underWay(page, 6);
      gates.release('web-reload');
      await answered(page, `echo: ${LONG}`);

      expect(await page.locator('[data-role="user"]').count()).toBe(1);
      expect(await assistants(page).count()).toBe(1);
      // After the reload the page showed the reply still growing: it resumed the stream,
      // it did not only load the finished reply.
      const id = (await assistants(page).getAttribute('data-id'))!;
      const texts = grown(await frames(page), id);
      expect(texts.some((t) => t.length < `echo: ${LONG}`.length)).toBe(true);
      expect((await store.readHistory('web-reload')).filter((m) => m.role === 'assistant')).toHaveLength(1);
      await page.close();
    });

    it('a second tab on the same chat sees the same reply', async () => {
      const gates = stack.mock.state.chunkGates;
      // Held from its first piece until the second tab shows part of it: the second tab opens
      // while the reply streams, however slowly the page loads.
      gates.hold('web-tabs');
      const first = await open('web-tabs');
      await send(first, LONG);
      await underWay(first, 6);
      const second = await open('web-tabs');
      await underWay(second, 6);
      gates.release('web-tabs');
      await Promise.all([answered(first, `echo: ${LONG}`), answered(second, `echo: ${LONG}`)]);

      const ids = [
        await assistants(first).getAttribute('data-id'),
        await assistants(second).getAttribute('data-id'),
      ];
      expect(ids[0]).toBe(ids[1]);
      // The second tab followed it live, too.
      expect(grown(await frames(second), ids[1]!).length).toBeGreaterThanOrEqual(2);
      expect(await second.locator('[data-role="user"]').textContent()).toBe(LONG);
      await first.close();
      await second.close();
    });

    it('a worker killed mid-reply leaves the page showing the takeover’s reply, not a frozen half', async () => {
      const gates = stack.mock.state.chunkGates;
      // Held from its first piece until the worker is dead: it dies while the reply streams.
      gates.hold('web-kill');
      const page = await open('web-kill');
      await send(page, LONG);
      await underWay(page, 6);
      await worker.kill('SIGKILL');
      // The takeover's reply streams unheld.
      gates.release('web-kill');
      worker = await stack.start('worker');
      await answered(page, `echo: ${LONG}`);

      // One reply on the page, the committed one, and no half text left beside it.
      expect(await assistants(page).count()).toBe(1);
      expect(await assistants(page).locator('.text').count()).toBe(1);
      const history = await store.readHistory('web-kill');
      const replies = history.filter((m) => m.role === 'assistant');
      expect(replies).toHaveLength(1);
      expect(await assistants(page).getAttribute('data-id')).toBe(replies[0]!.id);
      expect((await store.readOutbox('web-kill', undefined, 10)).map((o) => o.text)).toEqual([
        `echo: ${LONG}`,
      ]);
      await page.close();
    }, 45_000);

    /** The approval the page shows for the newest waiting call, once it shows one. */
    async function waitingApproval(page: Page) {
      const approval = page.locator('[data-testid="approval"][data-state="approval-requested"]');
      await approval.waitFor({ timeout: 20_000 });
      return approval;
    }

    /** The newest approval's outcome as the page shows it, once it is `outcome`. */
    async function outcome(page: Page, state: string): Promise<void> {
      await page
        .locator(`[data-testid="approval"][data-state="${state}"]`)
        .last()
        .waitFor({ timeout: 30_000 });
    }

    it.skipIf(!haveSandbox)(
      'a command waits for the person: Approve (addToolApprovalResponse) runs it and the reply follows in the same message',
      async () => {
        const page = await open('web-approve');
        await send(page, '$ echo approved from the page');
        const approval = await waitingApproval(page);
        expect(await approval.locator('pre').textContent()).toContain('echo approved from the page');
        await approval.getByRole('button', { name: 'Approve' }).click();
        await outcome(page, 'output-available');
        await page.waitForFunction(
          `(window.__shown()?.text ?? '').includes('approved from the page') && document.querySelector('main')?.dataset.status === 'ready'`,
          undefined,
          { timeout: 30_000 },
        );
        // One assistant message: the call, its outcome, and the reply after it.
        expect(await assistants(page).count()).toBe(1);
        const history = await store.readHistory('web-approve');
        expect(history.map((m) => m.role)).toEqual(['user', 'assistant']);
        expect(await assistants(page).getAttribute('data-id')).toBe(history[1]!.id);
        const events = await store.readEvents('web-approve', undefined, 100);
        expect(events.find((e) => e.type === 'approval.resolved')?.data).toMatchObject({
          outcome: 'approved',
          by: 'web',
        });
        await page.close();
      },
      60_000,
    );

    it.skipIf(!haveSandbox)(
      'Deny: the command never runs, the page shows it denied and the reply that says so',
      async () => {
        const page = await open('web-deny');
        await send(page, '$ touch /workspace/denied');
        const approval = await waitingApproval(page);
        await approval.getByRole('button', { name: 'Deny' }).click();
        await outcome(page, 'output-denied');
        await answered(page, 'shell: Tool call execution denied.');
        expect(await page.getByTestId('approval-outcome').textContent()).toBe('denied');
        const events = await store.readEvents('web-deny', undefined, 100);
        expect(events.find((e) => e.type === 'approval.resolved')?.data).toMatchObject({ outcome: 'denied' });
        expect(events.some((e) => e.type === 'workspace.saved')).toBe(false);
        await page.close();
      },
      60_000,
    );

    it.skipIf(!haveSandbox)(
      'a reload while a request is open shows it again, still answerable',
      async () => {
        const page = await open('web-approve-reload');
        await send(page, '$ echo after the reload');
        await waitingApproval(page);
        await page.reload();
        const approval = await waitingApproval(page);
        expect(await approval.locator('pre').textContent()).toContain('echo after the reload');
        await approval.getByRole('button', { name: 'Approve' }).click();
        await outcome(page, 'output-available');
        await page.waitForFunction(
          `(window.__shown()?.text ?? '').includes('after the reload') && document.querySelector('main')?.dataset.status === 'ready'`,
          undefined,
          { timeout: 30_000 },
        );
        expect(await assistants(page).count()).toBe(1);
        await page.close();
      },
      60_000,
    );

    it('a token for another chat is refused: the page shows the error, and nothing is written', async () => {
      const page = await open('web-mine', await mintWebToken(SECRET, 'web-theirs'));
      await send(page, 'let me in');
      // The send itself was refused (useChat's error), not only the page's first load.
      await page.locator('main[data-status="error"]').waitFor({ timeout: 10_000 });
      expect(await page.getByRole('alert').textContent()).toContain('FORBIDDEN');
      expect(await assistants(page).count()).toBe(0);
      for (const chat of ['web-mine', 'web-theirs']) {
        expect(await store.readHistory(chat)).toEqual([]);
        expect(await store.pendingCount(chat)).toBe(0);
        expect(await store.readEvents(chat, undefined, 10)).toEqual([]);
      }
      await page.close();
    });
  },
);

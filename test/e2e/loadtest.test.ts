import { execFile } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { afterAll, describe, expect, it } from 'vitest';
import { parseLoadtestArgs } from '../../src/loadtest/options.js';
import type { LoadtestReport } from '../../src/loadtest/report.js';
import { runLoadtest } from '../../src/loadtest/run.js';
import { useStack } from '../helpers/stack.js';
import { webhookSecret } from '../helpers/webhooks.js';

/**
 * `chatlane loadtest` as a user runs it: a separate process driving real ingress and worker
 * processes (with the mock model) over HTTP only, then checking the invariants.
 */

const CLI = fileURLToPath(new URL('../../dist/cli.js', import.meta.url));
const dir = mkdtempSync(join(tmpdir(), 'chatlane-loadtest-'));
afterAll(() => rmSync(dir, { recursive: true, force: true }));

interface Run {
  code: number;
  stdout: string;
  stderr: string;
  report: LoadtestReport | undefined;
}

let runs = 0;
/** Async on purpose: the mock model answers from this process's event loop. */
function loadtest(args: string[]): Promise<Run> {
  const out = join(dir, `report-${runs++}.json`);
  return new Promise((resolve) => {
    execFile(
      process.execPath,
      [CLI, 'loadtest', ...args, '--out', out, '--progress', 'plain'],
      { env: { PATH: process.env.PATH ?? '' }, timeout: 60_000 },
      (err, stdout, stderr) => {
        let report: LoadtestReport | undefined;
        try {
          report = JSON.parse(readFileSync(out, 'utf8')) as LoadtestReport;
        } catch {
          report = undefined;
        }
        const code = err ? (typeof err.code === 'number' ? err.code : -1) : 0;
        resolve({ code, stdout, stderr, report });
      },
    );
  });
}

const invariant = (r: LoadtestReport, name: string) => r.invariants.find((i) => i.name === name);

describe('chatlane loadtest against a running stack', () => {
  const stack = useStack('e2e-loadtest', { roles: ['ingress', 'worker'], latencyMs: [40, 80] });

  it('open model with bursts: every message acknowledged, answered once and in order; exit 0', async () => {
    const run = await loadtest([
      '--url',
      stack.ingressUrl(),
      '--mock-url',
      stack.mock.url,
      '--chats',
      '12',
      '--messages',
      '6',
      '--rate',
      '60',
      '--bursts',
      '0.5',
      '--burst-window',
      '20',
      '--seed',
      '7',
      '--poll-interval',
      '50',
      '--drain',
      '30',
    ]);
    expect(run.stderr).toContain('loadtest:');
    expect(run.code, `${run.stdout}\n${run.stderr}\n${stack.problems()}`).toBe(0);
    const r = run.report!;
    expect(r.ok).toBe(true);
    expect(r.messages).toMatchObject({
      planned: 72,
      sent: 72,
      acked: 72,
      failed: 0,
      notSent: 0,
      answered: 72,
    });
    for (const inv of r.invariants) expect(inv, inv.name).toMatchObject({ ok: true, violations: 0 });
    // The model check really ran against the mock, it was not skipped.
    expect(invariant(r, 'model-serial')?.skipped).toBeUndefined();
    expect(r.model?.requests).toBeGreaterThan(0);
    expect(r.model?.requestsPerTurn).toBeGreaterThanOrEqual(2);
    expect(r.model?.maxInFlightPerChat).toBe(1);
    // Bursts land together: fewer turns than messages.
    expect(r.turns.committed).toBeLessThan(72);
    expect(r.turns.messagesPerTurn).toBeGreaterThan(1);
    // Every committed turn's tokens came with its event: the mock reports usage on each call.
    expect(r.turns.tokens.perTurn.count).toBe(r.turns.committed);
    expect(r.turns.tokens.input).toBeGreaterThan(r.turns.committed);
    expect(r.turns.tokens.output).toBeGreaterThan(0);
    expect(r.turns.tokens.cachedShare).toBeCloseTo(r.turns.tokens.cachedInput / r.turns.tokens.input, 3);
    expect(run.stdout).toMatch(/tokens +\d+\/turn .*cached\), output \d+/);
    expect(r.acks.latencyMs.count).toBe(72);
    expect(r.replies.latencyMs.count).toBe(72);
    expect(r.replies.latencyMs.p50).toBeGreaterThan(0);
    expect(r.fairness.worstChat?.chatKey).toMatch(/^lt-/);
    expect(r.client.requests).toBeGreaterThan(72);
    // Replies were seen on the chats' live streams (the default where the deployment has
    // them), not by polling: one stream per chat, and besides the sends, the probe, the
    // streams and the mock's /stats (before and after) only the final read-back of each chat
    // (events, outbox, messages) was requested.
    expect(r.replies.observedBy).toBe('sse-stream');
    expect(r.replies.resolutionMs).toBe(0);
    expect(r.replies.streams).toMatchObject({ chatsPolled: 0 });
    const streams = r.replies.streams!;
    expect(streams.opened - streams.reconnects).toBe(12);
    expect(r.client.requests).toBe(r.messages.sent + r.errors.retries + 1 + streams.opened + 2 + 3 * 12);
    expect(run.stdout).toContain('PASS');
    // Its chats are real chats of the deployment, read back independently of the tool.
    const history = await stack.store.readHistory(`lt-${r.runId}-0`);
    expect(history.filter((m) => m.role === 'user').map((m) => m.id)).toEqual(
      Array.from({ length: 6 }, (_, i) => `lt-${r.runId}-0-${i}`),
    );
  }, 90_000);

  const small = (extra: string[]) =>
    loadtest([
      '--url',
      stack.ingressUrl(),
      '--mock-url',
      stack.mock.url,
      '--chats',
      '6',
      '--messages',
      '3',
      '--rate',
      '60',
      '--poll-interval',
      '50',
      '--drain',
      '30',
      ...extra,
    ]);

  it('--replies poll reads replies from the outbox instead; every check holds', async () => {
    const run = await small(['--replies', 'poll']);
    expect(run.code, `${run.stdout}\n${run.stderr}\n${stack.problems()}`).toBe(0);
    const r = run.report!;
    expect(r.messages).toMatchObject({ acked: 18, answered: 18 });
    expect(r.replies).toMatchObject({ observedBy: 'outbox-poll', streams: null });
    expect(r.replies.latencyMs.count).toBe(18);
  }, 60_000);

  it('over --max-streams the other chats are polled, and every check still holds', async () => {
    const run = await small(['--replies', 'stream', '--max-streams', '2']);
    expect(run.code, `${run.stdout}\n${run.stderr}\n${stack.problems()}`).toBe(0);
    const r = run.report!;
    expect(r.messages).toMatchObject({ acked: 18, answered: 18 });
    expect(r.replies.observedBy).toBe('sse-stream + outbox-poll');
    expect(r.replies.streams!.opened).toBeGreaterThanOrEqual(2);
    expect(r.replies.streams!.chatsPolled).toBeGreaterThanOrEqual(1);
    expect(r.replies.latencyMs.count).toBe(18);
    expect(run.stdout).toMatch(/streams opened/);
  }, 60_000);

  it('--profile typing: bursts of 2-4 messages typed 300-900 ms apart, reported per burst', async () => {
    const run = await loadtest([
      '--url',
      stack.ingressUrl(),
      '--mock-url',
      stack.mock.url,
      '--profile',
      'typing',
      '--chats',
      '4',
      '--messages',
      '6',
      '--connections',
      '4',
      '--drain',
      '30',
    ]);
    expect(run.code, `${run.stdout}\n${run.stderr}\n${stack.problems()}`).toBe(0);
    const r = run.report!;
    expect(r.settings.profile).toBe('typing');
    const b = r.bursts!;
    // 6 messages a chat: 2+4, 3+3 or 4+2 — two bursts each.
    expect(b.bursts).toBe(8);
    expect(b.messagesPerBurst).toBe(3);
    // Without debounce the first message of a burst is answered at once: at least one model
    // call per burst, and every last message answered.
    expect(b.modelCallsPerBurst).toBeGreaterThanOrEqual(1);
    expect(b.repliesPerBurst.count).toBe(8);
    expect(b.lastMessageUnanswered).toBe(0);
    expect(b.lastMessageToReplyMs.count).toBe(8);
    expect(run.stdout).toMatch(/typing in bursts/);
    expect(run.stdout).toMatch(/bursts +8 of 3 messages/);
  }, 90_000);

  it('a chat answered by two model calls at once fails the run (mock /stats), exit 1', async () => {
    // What a broken lane would look like at the model: two requests of one chat of this run
    // in flight together (sent by hand to the mock, before the run starts).
    stack.mock.state.hold('lt-tamper-0');
    const body = (text: string) =>
      JSON.stringify({
        model: 'mock',
        messages: [
          { role: 'system', content: 'ChatKey: lt-tamper-0' },
          { role: 'user', content: text },
        ],
      });
    const post = (text: string) =>
      fetch(`${stack.mock.url}/chat/completions`, {
        method: 'POST',
        headers: { 'content-type': 'application/json' },
        body: body(text),
      });
    const both = Promise.all([post('a'), post('b')]);
    await stack.mock.state.waitForRequest('lt-tamper-0', 2);
    stack.mock.state.release('lt-tamper-0');
    await both;

    const run = await loadtest([
      '--url',
      stack.ingressUrl(),
      '--mock-url',
      stack.mock.url,
      '--run-id',
      'tamper',
      '--chats',
      '2',
      '--messages',
      '2',
      '--connections',
      '2',
    ]);
    expect(run.code).toBe(1);
    const r = run.report!;
    expect(invariant(r, 'model-serial')).toMatchObject({ ok: false, violations: 1 });
    expect(invariant(r, 'acked-once')?.ok).toBe(true);
    expect(run.stdout).toMatch(/\[FAIL\] the model never saw two requests/);
  }, 60_000);
});

describe('chatlane loadtest over signed generic webhooks', () => {
  const secret = webhookSecret();
  const stack = useStack('e2e-loadtest-webhook', {
    roles: ['ingress', 'worker'],
    latencyMs: [20, 60],
    env: {
      GENERIC_WEBHOOK_SOURCES: 'loadtest',
      GENERIC_WEBHOOK_SECRETS_LOADTEST: secret,
      GENERIC_WEBHOOK_REPLY_HOSTS: '127.0.0.1',
      GENERIC_WEBHOOK_REPLY_ALLOW_HTTP: 'true',
    },
  });

  it('messages go in signed, every reply is delivered back to the receiver and timed there; exit 0', async () => {
    const run = await loadtest([
      '--url',
      stack.ingressUrl(),
      '--mock-url',
      stack.mock.url,
      '--via',
      'webhook',
      '--webhook-secret',
      secret,
      '--chats',
      '8',
      '--messages',
      '3',
      '--rate',
      '40',
      '--drain',
      '30',
    ]);
    expect(run.code, `${run.stdout}\n${run.stderr}\n${stack.problems()}`).toBe(0);
    const r = run.report!;
    expect(r.messages).toMatchObject({ planned: 24, acked: 24, answered: 24 });
    expect(invariant(r, 'delivered')).toMatchObject({ ok: true, violations: 0 });
    expect(invariant(r, 'delivered')?.skipped).toBeUndefined();
    expect(r.deliveries?.received).toBeGreaterThanOrEqual(r.turns.committed);
    expect(r.deliveries?.rejected).toBe(0);
    expect(r.replies.observedBy).toBe('delivery to replyTo');
    // Stored under the webhook's id: `<source>:<webhook-id>`.
    const history = await stack.store.readHistory(`lt-${r.runId}-0`);
    expect(history.filter((m) => m.role === 'user').map((m) => m.id)).toEqual(
      [0, 1, 2].map((i) => `loadtest:lt-${r.runId}-0-${i}`),
    );
  }, 90_000);

  it('a wrong secret is refused by the deployment (401), so nothing is acknowledged; exit 1', async () => {
    const run = await loadtest([
      '--url',
      stack.ingressUrl(),
      '--via',
      'webhook',
      '--webhook-secret',
      webhookSecret(),
      '--chats',
      '1',
      '--messages',
      '1',
      '--drain',
      '1',
    ]);
    expect(run.code).toBe(1);
    expect(run.report?.errors.sendsByStatus).toEqual({ '401': 1 });
    expect(invariant(run.report!, 'sends-acknowledged')?.ok).toBe(false);
  }, 60_000);
});

describe('chatlane loadtest against a stack with no worker', () => {
  const stack = useStack('e2e-loadtest-noworker', { roles: ['ingress'] });

  it('acknowledged messages never answered: unanswered and pending checks fail, exit 1', async () => {
    const run = await loadtest([
      '--url',
      stack.ingressUrl(),
      '--chats',
      '3',
      '--messages',
      '2',
      '--rate',
      '50',
      '--drain',
      '1',
    ]);
    expect(run.code).toBe(1);
    const r = run.report!;
    expect(r.ok).toBe(false);
    expect(r.messages.acked).toBe(6);
    expect(r.timing.drainTimedOut).toBe(true);
    expect(invariant(r, 'answered')).toMatchObject({ ok: false, violations: 3 });
    expect(invariant(r, 'nothing-pending')).toMatchObject({ ok: false, violations: 6 });
    expect(invariant(r, 'acked-once')?.examples[0]).toMatch(/acknowledged, still pending/);
    expect(invariant(r, 'model-serial')?.skipped).toBe(true);
    expect(run.stdout).toMatch(/FAIL \(3 checks failed\)/);
  }, 60_000);

  it("a caller's settled hook ends the drain early; the checks still judge what the deployment holds", async () => {
    const opts = parseLoadtestArgs([
      ...['--url', stack.ingressUrl(), '--chats', '3', '--messages', '2', '--rate', '50'],
      ...['--drain', '30'],
    ]);
    if (opts === 'help') throw new Error('unreachable');
    const asked = new Set<string>();
    const result = await runLoadtest(opts, {
      settled: async (chats) => {
        for (const c of chats) asked.add(c.key);
        return chats.every((c) => c.acked === 2);
      },
    });
    const r = result.report;
    expect(asked).toEqual(new Set(result.chats.map((c) => c.key)));
    expect(r.messages.acked).toBe(6);
    expect(r.timing.drainTimedOut).toBe(false);
    expect(r.ok).toBe(false);
    expect(invariant(r, 'nothing-pending')).toMatchObject({ ok: false, violations: 6 });
  }, 60_000);

  it('stops at the request budget and fails rather than run unbounded', async () => {
    const run = await loadtest([
      '--url',
      stack.ingressUrl(),
      '--chats',
      '5',
      '--messages',
      '5',
      '--rate',
      '100',
      '--max-requests',
      '8',
      '--drain',
      '1',
    ]);
    expect(run.code).toBe(1);
    expect(run.report?.aborted).toMatch(/request budget of 8 exhausted/);
    expect(run.report?.client.requests).toBe(8);
  }, 60_000);

  it('refuses a target that is not http(s) before sending anything (exit 2)', async () => {
    const run = await loadtest(['--url', 'file:///etc/passwd']);
    expect(run.code).toBe(2);
    expect(run.stderr).toMatch(/only http and https/);
    expect(run.report).toBeUndefined();
  });
});

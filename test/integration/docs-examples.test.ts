import { type ChildProcess, execFile, spawn } from 'node:child_process';
import { afterAll, afterEach, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import { GenericWebhookSender } from '../../src/shared/delivery/generic-sender.js';
import { SenderRegistry } from '../../src/shared/delivery/sender.js';
import { waitReady } from '../../src/shared/redis.js';
import { standardSources } from '../../src/shared/webhooks/standard.js';
import { replyAsTurn, type TestDelivery, testDeliveryWorker } from '../helpers/delivery-worker.js';
import { docBlock, repoRoot as root } from '../helpers/docs.js';
import { type TestIngress, testIngress } from '../helpers/ingress.js';
import { committedEventData } from '../helpers/messages.js';
import { freePort } from '../helpers/ports.js';
import { deletePrefix, randomPrefix, testRedis, waitFor } from '../helpers/redis.js';
import { webhookSecret } from '../helpers/webhooks.js';

/**
 * The documents' examples for the signed generic webhook, the live stream and the contact book,
 * run as written against a real ingress and delivery worker: the curl + openssl signing in
 * bash, the Node program (`standardwebhooks`) and the EventSource snippet in `node`. Only
 * addresses and the secret are substituted. Each block is found by what it contains in README.md
 * or any page under docs/ (test/helpers/docs.ts), so moving a page keeps it tested.
 */

/** The one fenced block of `lang` that contains `marker`, in whichever document holds it. */
function block(lang: string, marker: string): string {
  return docBlock(lang, marker).code;
}

/** A `# {…}` output comment as a pattern: `…` stands for any value text. */
function outputPattern(comment: string): RegExp {
  const escaped = comment.replace(/[.*+?^${}()|[\]\\]/g, '\\$&');
  return new RegExp(`^${escaped.replaceAll('…', '[^",}]*')}$`);
}

/** The output comment (`# …`) right after the line holding `command` in a sh block. */
function documentedOutput(sh: string, command: string): string {
  const lines = sh.split('\n');
  const at = lines.findIndex((l) => l.includes(command));
  let i = at + 1;
  while (lines[i - 1]?.endsWith('\\')) i++;
  const comment = lines[i];
  expect(comment, `output comment after ${command}`).toMatch(/^# /);
  return comment!.slice(2);
}

function bash(script: string): Promise<string> {
  return new Promise((resolve, reject) => {
    execFile('bash', ['-euo', 'pipefail', '-c', script], { timeout: 20_000 }, (err, stdout, stderr) =>
      err ? reject(new Error(`${err.message}\n${stderr}`)) : resolve(stdout),
    );
  });
}

/** `node` running a documented snippet as an ES module from the repository (its node_modules). */
function runNode(code: string, env: Record<string, string>): { child: ChildProcess; out: string[] } {
  const child = spawn(process.execPath, ['--input-type=module', '-e', code], {
    cwd: root,
    env: { PATH: process.env.PATH ?? '', ...env },
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  const out: string[] = [];
  let rest = '';
  child.stdout!.on('data', (chunk: Buffer) => {
    const lines = (rest + chunk.toString('utf8')).split('\n');
    rest = lines.pop() ?? '';
    out.push(...lines);
  });
  child.stderr!.on('data', (chunk: Buffer) => out.push(`stderr: ${chunk.toString('utf8')}`));
  children.push(child);
  return { child, out };
}

const SECRET = webhookSecret();
const SOURCES = [{ name: 'crm', secrets: [SECRET] }];
const POLICY = { allowHttp: true, hosts: ['127.0.0.1'] };
const DOC_URL = 'https://crm.example.com/hooks/chatlane';

const redis = testRedis();
const children: ChildProcess[] = [];
let prefix: string;
let ing: TestIngress;
let base: string;
let delivery: TestDelivery;

beforeAll(() => waitReady(redis));
beforeEach(async () => {
  prefix = randomPrefix('docs');
  ing = await testIngress(redis, prefix, {
    genericWebhooks: { sources: standardSources(SOURCES), replyPolicy: POLICY },
  });
  base = await ing.app.listen({ host: '127.0.0.1', port: 0 });
  delivery = testDeliveryWorker(
    redis,
    prefix,
    new SenderRegistry([new GenericWebhookSender(standardSources(SOURCES), POLICY)]),
  );
});
afterEach(async () => {
  for (const child of children.splice(0)) child.kill('SIGKILL');
  await delivery.close();
  const closeIdle = setInterval(() => ing.app.server.closeAllConnections(), 20);
  await ing.close();
  clearInterval(closeIdle);
  await deletePrefix(redis, prefix);
});
afterAll(() => redis.disconnect());

describe('docs/webhooks-and-delivery.md: signed generic webhooks', () => {
  it('the curl + openssl example is accepted as documented, and the contact book lists its sender', async () => {
    const sh = block('sh', 'openssl dgst');
    const receiver = `http://127.0.0.1:${await freePort()}/hooks/chatlane`;
    const script = sh
      .replace(/^SECRET=whsec_….*$/m, `SECRET='${SECRET}'`)
      .replaceAll(DOC_URL, receiver)
      .replaceAll('localhost:3000', base.replace('http://', ''));
    // Nothing left to fill in but the output comment.
    expect(script.split('\n').filter((l) => l.includes('…') && !l.startsWith('#'))).toEqual([]);
    const out = (await bash(script)).trim();
    expect(out).toMatch(outputPattern(documentedOutput(sh, 'curl -X POST')));
    expect(JSON.parse(out)).toMatchObject({ chatKey: 'ticket-42', status: 'accepted' });

    const contactsSh = block('sh', '/v1/contacts?query=');
    const contacts = (
      await bash(contactsSh.replaceAll('localhost:3000', base.replace('http://', '')))
    ).trim();
    expect(contacts).toMatch(outputPattern(documentedOutput(contactsSh, 'curl -s')));
  });

  it('the Node program sends a signed message, and its receiver verifies each reply and keeps one per id', async () => {
    const port = await freePort();
    const replyUrl = `http://127.0.0.1:${port}/hooks/chatlane`;
    const { out } = runNode(block('js', "from 'standardwebhooks'"), {
      CHATLANE_SECRET: SECRET,
      CHATLANE_URL: base,
      REPLY_URL: replyUrl,
      PORT: String(port),
    });
    await waitFor(async () => out.some((l) => l.startsWith('202 ')), { what: 'the 202 it prints' });
    const ack = out.find((l) => l.startsWith('202 '))!;
    expect(JSON.parse(ack.slice(4))).toMatchObject({ chatKey: 'ticket-42', status: 'accepted' });

    // The agent answers; the delivery worker POSTs the reply, signed, to the program.
    const [itemId] = await replyAsTurn(ing.store, delivery.queue, 'ticket-42', ['It ships today.']);
    await waitFor(async () => out.includes('reply for ticket-42: It ships today.'), {
      what: 'the verified reply printed',
    });

    // A redelivery (same item, same webhook-id) is accepted and not shown again; a body not
    // signed with the secret is refused.
    const sender = new GenericWebhookSender(standardSources(SOURCES), POLICY);
    const route = { channel: 'generic', source: 'crm', url: replyUrl };
    const item = (await ing.store.readOutbox('ticket-42', undefined, 10)).find((i) => i.id === itemId)!;
    const again = await sender.send({
      chatKey: 'ticket-42',
      route,
      item,
      attempt: 2,
      signal: AbortSignal.timeout(5000),
    });
    expect(again).toEqual({ status: 'ok' });
    const forged = await fetch(replyUrl, {
      method: 'POST',
      headers: {
        'content-type': 'application/json',
        'webhook-id': 'msg_forged',
        'webhook-timestamp': String(Math.floor(Date.now() / 1000)),
        'webhook-signature': 'v1,Zm9yZ2Vk',
      },
      body: JSON.stringify({ type: 'chat.reply', chatKey: 'ticket-42', id: 'msg_forged', text: 'pay here' }),
    });
    expect(forged.status).toBe(401);
    expect(out.filter((l) => l.startsWith('reply for'))).toEqual(['reply for ticket-42: It ships today.']);
    expect(out.filter((l) => l.startsWith('stderr'))).toEqual([]);
  });
});

describe('docs/live-stream.md: live stream', () => {
  it('the EventSource example prints replies and events as they happen', async () => {
    const code = `import { EventSource } from 'eventsource';\n${block('js', 'new EventSource(').replaceAll(
      'http://localhost:3000',
      base,
    )}`;
    const { out } = runNode(code, {});
    await waitFor(async () => ing.app.chatlane.streams.size === 1, { what: 'the example connected' });
    await replyAsTurn(ing.store, delivery.queue, 'alice', ['hello alice']);
    await ing.store.appendEvent('alice', 'turn.committed', committedEventData('r1'));
    await waitFor(async () => out.includes('event: turn.committed'), { what: 'the event printed' });
    expect(out).toContain('reply: hello alice');
  });
});

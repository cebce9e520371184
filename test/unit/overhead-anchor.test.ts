import { readFileSync } from 'node:fs';
import { describe, expect, it } from 'vitest';
import { CHAT_SEND_MAX_CHARS, chatSendTool } from '../../src/worker/agent/tools/chat-send.js';

// The overhead benchmark's anchor (bench/bare-loop.mjs) is plain JavaScript run by plain node,
// so it cannot import the worker's tool: its copy is checked here instead. A shorter copy
// would make the anchor's requests smaller than chatlane's for the same tool.
const bareLoop = readFileSync(new URL('../../bench/bare-loop.mjs', import.meta.url), 'utf8');
const benchFile = (name: string) => readFileSync(new URL(`../../bench/${name}`, import.meta.url), 'utf8');

describe('the overhead benchmark’s bare loop', () => {
  it('offers chat_send with the worker’s description and input limits', () => {
    expect(chatSendTool.description).toBeTruthy();
    expect(bareLoop).toContain(`description: '${chatSendTool.description}'`);
    expect(bareLoop).toContain(`z.object({ text: z.string().min(1).max(${CHAT_SEND_MAX_CHARS}) })`);
  });

  it('sends the worker side’s message in a chat key of the same length, so the mock’s echo is the same size', () => {
    // The worker side: seedChats writes `message ${m} of ${chatKey}`, one message (m = 0) a chat.
    // biome-ignore lint/suspicious/noTemplateCurlyInString: the files' source text is what is checked
    expect(benchFile('lib/util.ts')).toContain('`message ${m} of ${chatKey}`');
    // biome-ignore lint/suspicious/noTemplateCurlyInString: the files' source text is what is checked
    expect(bareLoop).toContain('content: text || `message 0 of ${chatKey}`');
    const label = (name: string) =>
      new RegExp(`export const ${name} = '([^']*)'`).exec(benchFile('lib/fleet.ts'))?.[1];
    expect(label('FLEET_LABEL')).toBeTruthy();
    expect(label('ANCHOR_LABEL')?.length).toBe(label('FLEET_LABEL')?.length);
    // Both name their chats <prefix>-w<i> for the warm-up and <prefix>-c<i> after it.
    // biome-ignore lint/suspicious/noTemplateCurlyInString: the files' source text is what is checked
    expect(bareLoop).toContain('await turn(`${prefix}-${kind}${next++}`)');
    expect(bareLoop).toMatch(/pool\('w', warmup\)/);
    expect(bareLoop).toMatch(/pool\('c', turns\)/);
  });
});

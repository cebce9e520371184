import { readFileSync } from 'node:fs';
import { describe, expect, it } from 'vitest';
import { CHAT_SEND_MAX_CHARS, chatSendTool } from '../../src/worker/agent/tools/chat-send.js';

// The overhead benchmark's anchor (bench/bare-loop.mjs) is plain JavaScript run by plain node,
// so it cannot import the worker's tool: its copy is checked here instead. A shorter copy
// would make the anchor's requests smaller than chatlane's for the same tool.
const bareLoop = readFileSync(new URL('../../bench/bare-loop.mjs', import.meta.url), 'utf8');

describe('the overhead benchmark’s bare loop', () => {
  it('offers chat_send with the worker’s description and input limits', () => {
    expect(chatSendTool.description).toBeTruthy();
    expect(bareLoop).toContain(`description: '${chatSendTool.description}'`);
    expect(bareLoop).toContain(`z.object({ text: z.string().min(1).max(${CHAT_SEND_MAX_CHARS}) })`);
  });
});

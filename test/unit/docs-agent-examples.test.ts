import { readFileSync } from 'node:fs';
import { describe, expect, it } from 'vitest';
import { parseSkill } from '../../src/worker/agent/skills.js';
import { mcpConfigSchema } from '../../src/worker/mcp/mcp-config.js';
import { docBlock, repoRoot } from '../helpers/docs.js';

/**
 * docs/agent.md's configuration examples are the shipped files and pass the checks the worker
 * runs at start: the mcp.json block is examples/mcp.json and parses with the MCP config schema,
 * the SKILL.md block is the start of examples/skills/weather/SKILL.md and parses as a skill.
 * (The memory example runs against a real ingress in test/integration/memory-http.test.ts.)
 */

const file = (path: string) => readFileSync(`${repoRoot}${path}`, 'utf8');

describe('docs/agent.md examples', () => {
  it('the mcp.json example is examples/mcp.json and the worker accepts it', () => {
    const block = docBlock('json', '"mcpServers"');
    expect(block.doc).toBe('docs/agent.md');
    expect(JSON.parse(block.code)).toEqual(JSON.parse(file('examples/mcp.json')));
    const parsed = mcpConfigSchema.parse(JSON.parse(block.code));
    expect(Object.keys(parsed.mcpServers)).toEqual(['everything', 'tickets']);
  });

  it('the SKILL.md example is the start of the shipped weather skill and parses as one', () => {
    const block = docBlock('markdown', 'name: weather');
    const shipped = file('examples/skills/weather/SKILL.md');
    const shown = block.code.replace(/…\n$/, '');
    expect(shipped.startsWith(shown)).toBe(true);
    expect(parseSkill(block.code)).toMatchObject({ name: 'weather' });
  });
});

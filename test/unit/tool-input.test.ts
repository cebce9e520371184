import { zodSchema } from 'ai';
import { describe, expect, it } from 'vitest';
import { z } from 'zod';
import { toolInput } from '../../src/worker/agent/tools/input.js';

describe('toolInput', () => {
  const schema = z.object({ text: z.string().min(1).max(10), limit: z.number().int().optional() });

  it('sends the JSON Schema zod writes, without its $schema URL', () => {
    const { $schema, ...expected } = zodSchema(schema).jsonSchema;
    expect($schema).toBeDefined();
    expect(toolInput(schema).jsonSchema).toEqual(expected);
    expect(JSON.stringify(toolInput(schema).jsonSchema)).not.toContain('$schema');
  });

  it('validates input with the zod schema', async () => {
    const input = toolInput(schema);
    expect(await input.validate!({ text: 'hi' })).toEqual({ success: true, value: { text: 'hi' } });
    expect((await input.validate!({ text: '' })).success).toBe(false);
  });
});

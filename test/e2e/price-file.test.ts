import { mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { startRole } from '../helpers/processes.js';
import { useStack } from '../helpers/stack.js';

describe('a bad MODEL_PRICES_FILE', () => {
  const stack = useStack('e2e-prices', { roles: [] });
  const dir = mkdtempSync(join(tmpdir(), 'chatlane-prices-e2e-'));
  const bad = join(dir, 'prices.yaml');
  writeFileSync(bad, 'models:\n  gpt-4o: { input: cheap, output: 10 }\n');

  it.each(['ingress', 'worker', 'compactor'] as const)(
    'stops the %s before it is ready, naming the variable',
    async (role) => {
      await expect(startRole(role, { ...stack.env, MODEL_PRICES_FILE: bad })).rejects.toThrow(
        /exited with \d+ before it was ready: .*MODEL_PRICES_FILE: .*prices\.yaml: models\.gpt-4o\.input/s,
      );
    },
  );
});

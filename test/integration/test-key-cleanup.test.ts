import { readdirSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { afterAll, describe, expect, it } from 'vitest';
import {
  deleteLabel,
  deletePrefix,
  keysUnder,
  labelPattern,
  randomPrefix,
  testRedis,
} from '../helpers/redis.js';

/**
 * Test files run side by side on one Redis, each in its own key prefix. A file's cleanup of
 * "every prefix of my label" once used `cltest-hostile-*`, which also matched the prefixes
 * of the `hostile-in` label: one file deleted another's chat mid-test (a CI failure).
 */

const redis = testRedis();
const TEST_DIR = fileURLToPath(new URL('..', import.meta.url));
const made: string[] = [];

afterAll(async () => {
  for (const prefix of made) await deletePrefix(redis, prefix);
  redis.disconnect();
});

function testFiles(dir: string): string[] {
  return readdirSync(dir, { withFileTypes: true }).flatMap((e) =>
    e.isDirectory() ? testFiles(join(dir, e.name)) : e.name.endsWith('.ts') ? [join(dir, e.name)] : [],
  );
}

describe("a test file's cleanup of its label", () => {
  it("deletes every prefix of its label and none of a longer label's that starts with it", async () => {
    const mine = [randomPrefix('cleanup'), randomPrefix('cleanup')];
    const theirs = [randomPrefix('cleanup-in'), randomPrefix('cleanup-ab12cd34')];
    made.push(...mine, ...theirs);
    for (const prefix of [...mine, ...theirs]) await redis.set(`${prefix}:{c:chat}:meta`, '1');

    expect((await keysUnder(redis, labelPattern('cleanup'))).sort()).toEqual(
      mine.map((p) => `${p}:{c:chat}:meta`).sort(),
    );
    await deleteLabel(redis, 'cleanup');
    for (const prefix of mine) expect(await keysUnder(redis, prefix)).toEqual([]);
    for (const prefix of theirs) expect(await keysUnder(redis, prefix)).toEqual([`${prefix}:{c:chat}:meta`]);
  });

  it('is never a bare wildcard over a label in any test file (use deleteLabel)', () => {
    const offenders = testFiles(TEST_DIR).filter((f) =>
      /deletePrefix\([^)]*['`]cltest-[^'`]*\*['`]/.test(readFileSync(f, 'utf8')),
    );
    expect(offenders).toEqual([]);
  });
});

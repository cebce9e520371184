import { cpSync, existsSync, mkdtempSync, readdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { blocks } from '../helpers/docs.js';
import { type ProcessRun, runToExit } from '../helpers/processes.js';
import { deleteLabel, REDIS_ENV, randomPrefix, testRedis } from '../helpers/redis.js';

/**
 * chatlane as a user installs it: `npm pack`, the tarball installed into a new project with the
 * user's own `ai`, `zod` and `@types/node`, a user's TypeScript (strict, nodenext, skipLibCheck)
 * type-checked with the repository's compiler and run on the Node running the suite (CI runs it
 * on 22 and 24). Each program ends with `close()` and nothing else: it must exit by itself.
 */

const root = fileURLToPath(new URL('../../', import.meta.url));
const FIXTURES = join(root, 'test/fixtures/package-user');
const EXAMPLE = join(root, 'examples/custom-tools');
const TSC = join(root, 'node_modules/typescript/bin/tsc');
const LABEL = 'package';

/** How long a program may take after its last line before it counts as held open by a handle. */
const EXIT_WITHIN_MS = 60_000;

let project: string;

beforeAll(async () => {
  if (!existsSync(join(root, 'dist/index.d.ts')))
    throw new Error('dist/ is missing: run `npm run build` (npm test does)');
  project = mkdtempSync(join(tmpdir(), 'chatlane-package-'));
  const packed = await runToExit('npm', ['pack', '--pack-destination', project], {
    cwd: root,
    timeoutMs: 120_000,
  });
  const tarball = readdirSync(project).find((f) => f.endsWith('.tgz'));
  if (packed.code !== 0 || !tarball) throw new Error(`npm pack failed: ${packed.err}`);
  writeFileSync(
    join(project, 'package.json'),
    JSON.stringify({ name: 'chatlane-user', private: true, type: 'module' }),
  );
  // The user's own ai, zod and Node types, next to chatlane (cached packages where the cache has them).
  const installed = await runToExit(
    'npm',
    [
      'install',
      '--prefer-offline',
      '--no-audit',
      '--no-fund',
      `./${tarball}`,
      'ai@^7',
      'zod@^4',
      '@types/node@^22',
    ],
    { cwd: project, timeoutMs: 540_000 },
  );
  if (installed.code !== 0) throw new Error(`npm install of the tarball failed: ${installed.err}`);
  cpSync(FIXTURES, project, { recursive: true });
  // The example, as it is in the repository, inside the project: it resolves the installed chatlane.
  for (const part of ['src', 'tsconfig.json', 'package.json']) {
    cpSync(join(EXAMPLE, part), join(project, 'example', part), { recursive: true });
  }
}, 600_000);

afterAll(async () => {
  if (project) rmSync(project, { recursive: true, force: true });
  const redis = testRedis();
  await deleteLabel(redis, LABEL);
  redis.disconnect();
});

/** Type-checks and compiles one user program; the compiler's complaints, if any. */
async function compile(name: string): Promise<string> {
  writeFileSync(
    join(project, `tsconfig.${name}.json`),
    JSON.stringify({ extends: './tsconfig.json', files: [`${name}.ts`] }),
  );
  const { code, out, err } = await runToExit(process.execPath, [TSC, '-p', `tsconfig.${name}.json`], {
    cwd: project,
    timeoutMs: 120_000,
  });
  return code === 0 ? '' : `${out}${err}`;
}

/** Runs a compiled program with Redis and a key prefix of its own and no model configured. */
async function start(
  name: string,
  file = join('out', `${name}.js`),
): Promise<ProcessRun & { result: Record<string, unknown> | undefined }> {
  const env: NodeJS.ProcessEnv = {
    ...process.env,
    ...REDIS_ENV,
    CHATLANE_PREFIX: randomPrefix(LABEL),
    LOG_LEVEL: 'warn',
  };
  delete env.LLM_MODEL;
  delete env.LLM_BASE_URL;
  const ran = await runToExit(process.execPath, [file], {
    cwd: project,
    env,
    timeoutMs: EXIT_WITHIN_MS,
  });
  const line = ran.out.split('\n').find((l) => l.startsWith('{"result"'));
  return {
    ...ran,
    result: line ? (JSON.parse(line) as { result: Record<string, unknown> }).result : undefined,
  };
}

/** A program's run as a failure message names it. */
const shown = (r: ProcessRun) =>
  `exit ${r.code ?? r.signal}${r.hung ? ' (killed: it did not exit by itself)' : ''}\n${r.out}\n${r.err}`;

/** A case: compile (a few seconds) and a run that may take EXIT_WITHIN_MS before it counts as hung. */
const CASE_TIMEOUT_MS = 180_000;

describe('the packed package in a new TypeScript project', () => {
  it(
    'import { startChatlane } type-checks (strict, nodenext); a worker and an ingress with a model given in code answer a message; after close() the process exits by itself',
    async () => {
      expect(await compile('start-close')).toBe('');
      const ran = await start('start-close');
      expect(ran.hung, shown(ran)).toBe(false);
      expect(ran.code, shown(ran)).toBe(0);
      expect(ran.result).toMatchObject({
        roles: ['worker', 'ingress'],
        replies: ['hello from a model in code'],
        modelCalls: 2,
      });
    },
    CASE_TIMEOUT_MS,
  );

  it(
    'a bad value throws the ConfigError naming the variable, and a tool named chat_send is refused with an error naming it',
    async () => {
      expect(await compile('refused')).toBe('');
      const ran = await start('refused');
      expect(ran.code, shown(ran)).toBe(0);
      const { badPort, chatSend } = ran.result as Record<string, { configError: boolean; message: string }>;
      expect(badPort).toMatchObject({ configError: true });
      expect(badPort!.message).toMatch(/PORT:/);
      expect(chatSend).toMatchObject({ configError: true });
      expect(chatSend!.message).toContain('chat_send');
    },
    CASE_TIMEOUT_MS,
  );

  it(
    "a custom tool from the user's own `ai` is called with the chat's chatKey in options.context",
    async () => {
      expect(await compile('tool-context')).toBe('');
      const ran = await start('tool-context');
      expect(ran.code, shown(ran)).toBe(0);
      expect(ran.result).toMatchObject({ seen: ['pkg-tool'], replies: ['order 42 has shipped'] });
    },
    CASE_TIMEOUT_MS,
  );

  it(
    'instructions given in code reach the system prompt',
    async () => {
      expect(await compile('instructions')).toBe('');
      const ran = await start('instructions');
      expect(ran.code, shown(ran)).toBe(0);
      expect(String(ran.result?.system)).toContain('You are the order desk.');
    },
    CASE_TIMEOUT_MS,
  );

  it(
    'examples/custom-tools type-checks against the package and its check passes: the tools get the chat, once refunds once, the retrieval Provider reaches the model',
    async () => {
      const example = JSON.parse(readFileSync(join(project, 'example/package.json'), 'utf8')) as {
        dependencies: Record<string, string>;
      };
      // What the example depends on is what the project installed from the tarball and the registry.
      for (const dependency of Object.keys(example.dependencies)) {
        expect(existsSync(join(project, 'node_modules', dependency, 'package.json')), dependency).toBe(true);
      }
      const compiled = await runToExit(process.execPath, [TSC, '-p', 'example/tsconfig.json'], {
        cwd: project,
        timeoutMs: 120_000,
      });
      expect(`${compiled.out}${compiled.err}`).toBe('');
      const ran = await start('example', join('example', 'dist', 'check.js'));
      expect(ran.code, shown(ran)).toBe(0);
      expect(ran.out).toContain('order desk check passed');
    },
    CASE_TIMEOUT_MS,
  );

  it(
    "README's example (Use it from code) type-checks against the package",
    async () => {
      const readme = blocks('ts').filter((b) => b.doc === 'README.md');
      expect(readme).toHaveLength(1);
      writeFileSync(join(project, 'readme.ts'), readme[0]!.code);
      expect(await compile('readme')).toBe('');
    },
    CASE_TIMEOUT_MS,
  );
});

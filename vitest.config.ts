import { defineConfig } from 'vitest/config';

// Integration and e2e tests share one Redis (random prefix each) and spawn processes, and spend
// much of their time waiting on them: on a 2-core machine three files at a time finished the
// suite in 274 s against 324–363 s with two (2026-11-26), no test lost.
const FILES_AT_ONCE = 3;

export default defineConfig({
  test: {
    pool: 'forks',
    maxWorkers: FILES_AT_ONCE,
    // A test file runs in a process (unit: a thread) that earlier files used: a fresh process
    // per file spent much of the suite importing the same packages again (`vitest run` 330 s
    // against 210 s, 2026-11-27). The source modules still load afresh for each file of the
    // redis project (below); node_modules load once per process. A test about what a process
    // loads starts a process of its own.
    // - Each pool keeps its workers for the whole run: tinypool (vitest 3.2) retiring an idle
    //   one of a pool without isolation races its teardown and fails the run with "Terminating
    //   worker thread".
    // - One unit thread beside the three forks (15–17 s for the unit files). It was first
    //   chosen after an e2e ingress answered 503 for 20 s with three threads; that failure
    //   came back with one, and its likely cause is a queue set up during a stall, not the
    //   thread count (src/shared/ready-queue.ts).
    poolOptions: {
      threads: { isolate: false, minThreads: 1, maxThreads: 1 },
      forks: { isolate: false, minForks: FILES_AT_ONCE },
    },
    // Never production: the test helpers start ingresses without an API token in many places,
    // which an ingress refuses under NODE_ENV=production (processes they spawn inherit it).
    env: { NODE_ENV: 'test' },
    testTimeout: 30_000,
    hookTimeout: 60_000,
    projects: [
      // No Redis: `npm run test:unit` runs on a machine without one.
      {
        extends: true,
        test: {
          name: 'unit',
          include: ['test/unit/**/*.test.ts'],
          // A thread that imports the modules once, instead of a process per file importing
          // them afresh (15–17 s against 30–36 s, 2026-11-27): these files spawn nothing and
          // bind no fixed port, and they passed three runs in shuffled order; the one that
          // mocks a module loads its subject anew.
          pool: 'threads',
        },
      },
      {
        extends: true,
        test: {
          name: 'redis',
          include: ['test/integration/**/*.test.ts', 'test/e2e/**/*.test.ts'],
          // Finds Redis at REDIS_URL, or starts a throwaway one for the run.
          globalSetup: ['test/helpers/global-setup.ts'],
          // Each file gets its own instance of chatlane's modules (its own metrics registry,
          // config, singletons), as in a process of its own.
          poolOptions: { forks: { isolate: true } },
        },
      },
    ],
  },
});

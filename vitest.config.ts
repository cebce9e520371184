import { defineConfig } from 'vitest/config';

export default defineConfig({
  test: {
    // Integration and e2e tests share one Redis (random prefix each) and spawn processes,
    // and spend much of their time waiting on them: on a 2-core machine three files at a
    // time finished the suite in 274 s against 324–363 s with two (2026-11-26), no test lost.
    pool: 'forks',
    maxWorkers: 3,
    testTimeout: 30_000,
    hookTimeout: 60_000,
    projects: [
      // No Redis: `npm run test:unit` runs on a machine without one.
      { extends: true, test: { name: 'unit', include: ['test/unit/**/*.test.ts'] } },
      {
        extends: true,
        test: {
          name: 'redis',
          include: ['test/integration/**/*.test.ts', 'test/e2e/**/*.test.ts'],
          // Finds Redis at REDIS_URL, or starts a throwaway one for the run.
          globalSetup: ['test/helpers/global-setup.ts'],
        },
      },
    ],
  },
});

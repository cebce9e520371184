import { defineConfig } from 'vitest/config';

export default defineConfig({
  test: {
    include: ['test/**/*.test.ts'],
    // Integration and e2e tests share one Redis (random prefix each) and spawn processes:
    // on a 2-core machine a few files at a time is the sweet spot.
    pool: 'forks',
    maxWorkers: 2,
    testTimeout: 30_000,
    hookTimeout: 60_000,
    globalSetup: ['test/helpers/global-setup.ts'],
  },
});

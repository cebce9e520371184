import { readFileSync } from 'node:fs';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { BareProcess, type BareRun } from '../../bench/bare-side.js';
import { mockStats, startMock } from '../../bench/lib/fleet.js';
import type { RoleProcess } from '../helpers/processes.js';

// The anchor of the overhead and stream benchmarks (bench/bare-loop.mjs) against the real mock
// model: a figure is only as good as the turns it counts.
describe('the benchmarks’ bare-loop anchor', () => {
  let mock: RoleProcess;
  beforeAll(async () => {
    mock = await startMock(20);
  });
  afterAll(async () => {
    await mock?.kill('SIGKILL');
  });

  /** One warm-up turn, `turns` a plain `go`, one turn at a time, on the test's mock. */
  const startBare = (turns: number, more: Pick<BareRun, 'nodeArgs'> = {}) =>
    BareProcess.start({
      mockUrl: mock.url!,
      concurrency: 1,
      turns,
      warmup: 1,
      timeoutMs: 30_000,
      statsOf: (p) => mockStats(mock, `${p}-`),
      ...more,
    });

  it('runs round after round in one process, each in chats of its own, two model calls a turn', async () => {
    const bare = await startBare(2);
    try {
      const first = await bare.round(4);
      const second = await bare.round(3);
      expect([first.turns, first.modelCalls]).toEqual([4, 8]);
      expect([second.turns, second.modelCalls]).toEqual([3, 6]);
      const requestsOf = async (chats: string) => (await mockStats(mock, `${bare.prefix}-${chats}`)).requests;
      expect([await requestsOf('r0-'), await requestsOf('r1-')]).toEqual([8, 6]);
      // A bare `go` still runs the configured turns (the overhead benchmark's protocol).
      const configured = await bare.round();
      expect([configured.turns, configured.modelCalls]).toEqual([2, 4]);
      expect(first.cpuS).toBeGreaterThan(0);
      // Every request of the process so far: the warm-up turn and the three rounds.
      expect((await mockStats(mock, `${bare.prefix}-`)).requests).toBe(2 * (1 + 4 + 3 + 2));
    } finally {
      await bare.stop();
    }
  });

  it('runs a round of n turns k at a time when given k (the stream benchmark keeps k in flight)', async () => {
    // Calls long enough for the 200 ms in-flight sampler to see each turn's.
    const slow = await startMock(300);
    try {
      const bare = await BareProcess.start({
        mockUrl: slow.url!,
        concurrency: 1,
        turns: 1,
        warmup: 1,
        timeoutMs: 30_000,
        statsOf: (p) => mockStats(slow, `${p}-`),
      });
      try {
        const round = await bare.round(6, 0, 2);
        expect([round.turns, round.modelCalls]).toEqual([6, 12]);
        expect(round.peakInFlight).toBe(2);
      } finally {
        await bare.stop();
      }
    } finally {
      await slow.kill('SIGKILL');
    }
  });

  it('starts node itself with the flags it is given (the stream benchmark gives both sides the same)', async () => {
    const bare = await startBare(1, { nodeArgs: ['--no-memory-reducer'] });
    try {
      const argv = readFileSync(`/proc/${bare.pid}/cmdline`, 'utf8').split('\0');
      // A flag for node, before the script: not an argument of bare-loop.mjs.
      const script = argv.findIndex((a) => a.endsWith('bare-loop.mjs'));
      expect(argv.indexOf('--no-memory-reducer')).toBeGreaterThan(0);
      expect(argv.indexOf('--no-memory-reducer')).toBeLessThan(script);
      expect((await bare.round(1)).modelCalls).toBe(2);
    } finally {
      await bare.stop();
    }
  });
});

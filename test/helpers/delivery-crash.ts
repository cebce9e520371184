import type { ServerResponse } from 'node:http';
import { expect } from 'vitest';
import type { RoleProcess } from './processes.js';

/**
 * The crash window of delivery (DESIGN §11): the receiving side has accepted an item, the
 * delivery process has not moved its cursor yet. Freezes `doomed` first so it cannot record the
 * acceptance, sends the receiver's answer if `answer` is given (the answer is written but never
 * read) or none at all, kills the process and drops the connection.
 */
export async function killInsideAcceptWindow(
  doomed: RoleProcess,
  res: ServerResponse,
  answer: (() => Promise<void>) | undefined,
): Promise<void> {
  process.kill(doomed.pid, 'SIGSTOP');
  if (answer) await answer();
  await doomed.kill('SIGKILL');
  res.destroy();
}

/** Resolves once `proc` has exited (or was killed by a signal). */
export function hasExited(proc: RoleProcess): () => Promise<boolean> {
  return async () => proc.child.exitCode !== null || proc.child.signalCode !== null;
}

/**
 * At-least-once delivery seen from the receiver: every arrival is one of `items` (in outbox
 * order), none arrives more than twice, and arrivals never go back to an earlier item once a
 * later one arrived.
 */
export function expectAtMostTwiceInOrder(arrivals: string[], items: string[]): void {
  const count = new Map<string, number>();
  for (const a of arrivals) count.set(a, (count.get(a) ?? 0) + 1);
  for (const [a, n] of count) expect(n, `${a} arrived ${n} times`).toBeLessThanOrEqual(2);
  const rank = arrivals.map((a) => items.indexOf(a));
  expect(rank, 'an arrival that is not an outbox item').not.toContain(-1);
  for (let i = 1; i < rank.length; i++) {
    expect(rank[i]! >= rank[i - 1]!, `arrival ${i} went back to an earlier item`).toBe(true);
  }
}

import type { ServerResponse } from 'node:http';
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

import { createHash } from 'node:crypto';
import { promisify } from 'node:util';
import { constants, createGzip, gunzip } from 'node:zlib';
import { settle } from './run-command.js';
import { type SandboxSpec, spawnSandboxed, WORKSPACE } from './sandbox.js';

/**
 * A workspace to and from its archive (a gzipped tar). GNU tar runs inside the sandbox, over
 * the workspace only, as the sandbox's user: extracting an archive that holds a symlink out
 * of the workspace, `..` names or absolute paths can write nothing the sandbox could not
 * write itself (the workspace and its private /tmp), and archiving never follows a symlink
 * (tar stores links as links) to read a file from outside. The host only counts, hashes and
 * compresses bytes. Both runs get the command limits, and a time limit of their own.
 */

const gunzipAsync = promisify(gunzip);

/** tar -c: the same tree gives the same bytes (sorted names, owner 0), whichever worker. */
const TAR_CREATE = [
  'tar',
  '--sort=name',
  '--numeric-owner',
  '--owner=0',
  '--group=0',
  '-C',
  WORKSPACE,
  '-cf',
  '-',
  '.',
];
/** tar -x: never as another owner; permissions as stored (less the umask). */
const TAR_EXTRACT = ['tar', '--no-same-owner', '-C', WORKSPACE, '-xf', '-'];

export interface Archived {
  /** The gzipped tar; undefined when over the cap. */
  archive: Buffer | undefined;
  /** Bytes of the tar before compression (for an archive over the cap: where it was cut). */
  bytes: number;
  /** sha256 of the uncompressed tar: equal hashes, the same workspace. */
  hash: string;
  overLimit: boolean;
}

export class ArchiveError extends Error {
  override name = 'ArchiveError';
}

/** Archive the workspace at `dir`, at most `maxBytes` of tar. */
export async function archiveWorkspace(
  spec: SandboxSpec,
  dir: string,
  opts: { maxBytes: number; timeoutMs: number },
): Promise<Archived> {
  const child = spawnSandboxed(spec, { workspace: dir, argv: TAR_CREATE });
  const hash = createHash('sha256');
  // Level 6 is zlib's default; the archive is written once a command and read once a turn.
  const gzip = createGzip({ level: constants.Z_DEFAULT_COMPRESSION });
  const compressed: Buffer[] = [];
  gzip.on('data', (chunk: Buffer) => compressed.push(chunk));
  const gzipped = new Promise<void>((resolve, reject) => {
    gzip.once('end', resolve);
    gzip.once('error', reject);
  });
  let bytes = 0;
  let overLimit = false;
  child.stdout!.on('data', (chunk: Buffer) => {
    if (overLimit) return;
    bytes += chunk.length;
    if (bytes > opts.maxBytes) {
      overLimit = true;
      child.stdout!.destroy();
      return;
    }
    hash.update(chunk);
    gzip.write(chunk);
  });
  const stderr: Buffer[] = [];
  child.stderr!.on('data', (chunk: Buffer) => {
    if (stderr.length < 16) stderr.push(chunk);
  });
  const done = await settle(child, { timeoutMs: opts.timeoutMs });
  gzip.end();
  await gzipped;
  if (overLimit) return { archive: undefined, bytes, hash: '', overLimit };
  if (done.exitCode !== 0) throw new ArchiveError(tarFailure('archive', done, stderr));
  return { archive: Buffer.concat(compressed), bytes, hash: hash.digest('hex'), overLimit };
}

export interface Restored {
  /** sha256 of the uncompressed tar; undefined when it was not restored whole. */
  hash: string | undefined;
  bytes: number;
  /** Why it was not restored whole (tar's complaint), if it was not. */
  problem?: string;
}

/**
 * Extract `archive` into the (empty) workspace at `dir`. An archive that would unpack past
 * `maxBytes`, or is not gzip, is not extracted at all; one tar extracts only in part (a member
 * it refuses) is kept as far as it went. Either way `problem` says so and `hash` is undefined:
 * the next archive is saved over it, and the chat is not left with a workspace no turn can open.
 */
export async function restoreWorkspace(
  spec: SandboxSpec,
  dir: string,
  archive: Buffer,
  opts: { maxBytes: number; timeoutMs: number },
): Promise<Restored> {
  let tar: Buffer;
  try {
    tar = await gunzipAsync(archive, { maxOutputLength: opts.maxBytes });
  } catch (err) {
    return {
      hash: undefined,
      bytes: 0,
      problem: `the saved workspace cannot be read: ${(err as Error).message}`,
    };
  }
  const child = spawnSandboxed(spec, { workspace: dir, argv: TAR_EXTRACT, stdin: 'pipe' });
  const stderr: Buffer[] = [];
  child.stderr!.on('data', (chunk: Buffer) => {
    if (stderr.length < 16) stderr.push(chunk);
  });
  child.stdout!.resume();
  // tar may exit before reading it all (a broken archive): EPIPE is its failure, not ours.
  child.stdin!.on('error', () => undefined);
  child.stdin!.end(tar);
  const done = await settle(child, { timeoutMs: opts.timeoutMs });
  if (done.exitCode !== 0)
    return { hash: undefined, bytes: tar.length, problem: tarFailure('restore', done, stderr) };
  return { hash: createHash('sha256').update(tar).digest('hex'), bytes: tar.length };
}

function tarFailure(what: string, done: { exitCode: number | null; timedOut: boolean }, stderr: Buffer[]) {
  const why = done.timedOut ? 'timed out' : `exit ${done.exitCode}`;
  return `workspace ${what} failed (${why}): ${Buffer.concat(stderr).toString('utf8').trim().slice(0, 500)}`;
}
